//! A small Python value, for the free-form parts of a snapshot (allocator settings,
//! annotations, user metadata) that are kept as they are and written back unchanged.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// A plain Python value as it appears in a pickle: `None`, `bool`, `int`, `float`, `str`,
/// `list`/`tuple` and `dict`. Dictionary keys that are not strings are kept as their text
/// (`1` becomes `"1"`), bytes as lossy UTF-8 text.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PyValue {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A float (also an integer too large for `i64`).
    Float(f64),
    /// A string.
    Str(String),
    /// A list or tuple.
    List(Vec<PyValue>),
    /// A dictionary.
    Dict(BTreeMap<String, PyValue>),
}

impl PyValue {
    /// The integer, if this is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            PyValue::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyValue::Str(v) => Some(v),
            _ => None,
        }
    }

    /// The value under `key`, if this is a dictionary that has it.
    pub fn get(&self, key: &str) -> Option<&PyValue> {
        match self {
            PyValue::Dict(map) => map.get(key),
            _ => None,
        }
    }

    /// The text used when this value is a dictionary key.
    fn into_key(self) -> String {
        match self {
            PyValue::None => "None".to_owned(),
            PyValue::Bool(true) => "True".to_owned(),
            PyValue::Bool(false) => "False".to_owned(),
            PyValue::Int(v) => v.to_string(),
            PyValue::Float(v) => v.to_string(),
            PyValue::Str(v) => v,
            other => format!("{other:?}"),
        }
    }
}

impl fmt::Display for PyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PyValue::None => f.write_str("None"),
            PyValue::Bool(v) => f.write_str(if *v { "True" } else { "False" }),
            PyValue::Int(v) => write!(f, "{v}"),
            PyValue::Float(v) => write!(f, "{v}"),
            PyValue::Str(v) => write!(f, "{v:?}"),
            PyValue::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            PyValue::Dict(map) => {
                f.write_str("{")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

struct PyValueVisitor;

impl<'de> Visitor<'de> for PyValueVisitor {
    type Value = PyValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a plain Python value")
    }

    fn visit_unit<E>(self) -> Result<PyValue, E> {
        Ok(PyValue::None)
    }

    fn visit_none<E>(self) -> Result<PyValue, E> {
        Ok(PyValue::None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<PyValue, D::Error> {
        PyValue::deserialize(d)
    }

    fn visit_bool<E>(self, v: bool) -> Result<PyValue, E> {
        Ok(PyValue::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<PyValue, E> {
        Ok(PyValue::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<PyValue, E> {
        Ok(i64::try_from(v).map_or(PyValue::Float(v as f64), PyValue::Int))
    }

    fn visit_f64<E>(self, v: f64) -> Result<PyValue, E> {
        Ok(PyValue::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<PyValue, E> {
        Ok(PyValue::Str(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<PyValue, E> {
        Ok(PyValue::Str(v))
    }

    fn visit_bytes<E>(self, v: &[u8]) -> Result<PyValue, E> {
        Ok(PyValue::Str(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PyValue, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element::<PyValue>()? {
            items.push(item);
        }
        Ok(PyValue::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PyValue, A::Error> {
        let mut out = BTreeMap::new();
        while let Some((k, v)) = map.next_entry::<PyValue, PyValue>()? {
            out.insert(k.into_key(), v);
        }
        Ok(PyValue::Dict(out))
    }
}

impl<'de> Deserialize<'de> for PyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PyValue, D::Error> {
        d.deserialize_any(PyValueVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_pickle() {
        let mut map = BTreeMap::new();
        map.insert("max_split_size".to_owned(), PyValue::Int(-1));
        map.insert("threshold".to_owned(), PyValue::Float(0.5));
        map.insert("flag".to_owned(), PyValue::Bool(false));
        map.insert("none".to_owned(), PyValue::None);
        map.insert(
            "list".to_owned(),
            PyValue::List(vec![PyValue::Str("a".into()), PyValue::Int(2)]),
        );
        let value = PyValue::Dict(map);
        let bytes = serde_pickle::to_vec(&value, serde_pickle::SerOptions::new()).unwrap();
        let back: PyValue =
            serde_pickle::from_slice(&bytes, serde_pickle::DeOptions::new()).unwrap();
        assert_eq!(back, value);
        assert_eq!(
            back.get("max_split_size").and_then(PyValue::as_i64),
            Some(-1)
        );
        assert!(back.to_string().contains("\"flag\": False"));
    }

    #[test]
    fn non_string_keys_become_text() {
        let bytes = serde_pickle::to_vec(
            &BTreeMap::from([(1i64, "one"), (2, "two")]),
            serde_pickle::SerOptions::new(),
        )
        .unwrap();
        let back: PyValue =
            serde_pickle::from_slice(&bytes, serde_pickle::DeOptions::new()).unwrap();
        assert_eq!(back.get("1").and_then(PyValue::as_str), Some("one"));
    }
}
