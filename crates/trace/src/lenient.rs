//! Field deserializers that read a Python `None` (or a shared value the pickle decoder gave
//! up on, which it also turns into `None`) as the field's default instead of failing.
//!
//! `serde_pickle` hands a memoized value it cannot resolve to the visitor as a unit value,
//! even where the field is an `Option`, so `Option<T>` alone is not enough.

use serde::de::{DeserializeOwned, Deserializer, Error, SeqAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// A string; `None` reads as `""`, bytes as lossy UTF-8.
pub(crate) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or None")
        }
        fn visit_unit<E>(self) -> Result<String, E> {
            Ok(String::new())
        }
        fn visit_none<E>(self) -> Result<String, E> {
            Ok(String::new())
        }
        fn visit_str<E>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_bytes<E>(self, v: &[u8]) -> Result<String, E> {
            Ok(String::from_utf8_lossy(v).into_owned())
        }
    }
    d.deserialize_any(V)
}

/// A signed integer; `None` reads as 0, `True`/`False` as 1/0.
pub(crate) fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer or None")
        }
        fn visit_unit<E>(self) -> Result<i64, E> {
            Ok(0)
        }
        fn visit_none<E>(self) -> Result<i64, E> {
            Ok(0)
        }
        fn visit_bool<E>(self, v: bool) -> Result<i64, E> {
            Ok(i64::from(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_u64<E: Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom(format!("integer {v} out of range")))
        }
    }
    d.deserialize_any(V)
}

/// An unsigned integer (addresses, sizes, stream handles); `None` reads as 0. A negative
/// value is an error.
pub(crate) fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = i64(d)?;
    u64::try_from(v).map_err(|_| D::Error::custom(format!("expected an unsigned integer, got {v}")))
}

/// A boolean; `None` reads as `false`, integers as `!= 0`.
pub(crate) fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(i64(d)? != 0)
}

/// A list or tuple; `None` reads as empty.
pub(crate) fn vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    struct V<T>(PhantomData<T>);
    impl<'de, T: DeserializeOwned> Visitor<'de> for V<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list or None")
        }
        fn visit_unit<E>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_none<E>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(item) = seq.next_element::<T>()? {
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_any(V(PhantomData))
}

/// [`vec`] for a field whose absence matters: present (even as `None`) reads as `Some`; an
/// absent field is `None` through `#[serde(default)]`.
pub(crate) fn present_vec<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    vec(d).map(Some)
}

/// A pair of integers (a pool id); `None` reads as `(0, 0)`, a shorter list pads with 0.
pub(crate) fn pair<'de, D: Deserializer<'de>>(d: D) -> Result<(i64, i64), D::Error> {
    #[derive(serde::Deserialize)]
    struct Int(#[serde(deserialize_with = "i64")] i64);
    let items: Vec<Int> = vec(d)?;
    let get = |i: usize| items.get(i).map_or(0, |v| v.0);
    Ok((get(0), get(1)))
}
