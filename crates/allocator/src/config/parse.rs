//! The `key:value,...` string: reading every item first, refusing duplicates and unknown keys
//! (with the nearest valid key), then checking the whole configuration at once, so the order
//! of the keys never changes the outcome.

use super::{bad, ROUNDUP_POWER2_INTERVALS};
use super::{AllocatorConfig, CrossStreamMode, ENV_VAR, MAX_HISTORY_SIZE, MIB};
use crate::error::AllocError;

/// Every key the string accepts: its name and the aliases that mean the same setting.
pub(crate) const KEYS: &[(&str, &[&str])] = &[
    ("max_split_size_mb", &[]),
    ("max_non_split_rounding_mb", &[]),
    ("large_segment_size_mb", &[]),
    ("roundup_power2_divisions", &[]),
    ("garbage_collection_threshold", &[]),
    ("per_process_memory_fraction", &["memory_fraction"]),
    ("limit_mb", &[]),
    ("cross_stream", &[]),
    ("reuse_pending_with_wait", &[]),
    ("lazy_event_polling", &["multi_stream_lazy_reclaim"]),
    ("release_before_grow", &[]),
    ("split_large_remainders", &[]),
    ("fit_large_segments", &[]),
    ("record_history", &[]),
    ("history_size", &["max_entries"]),
    ("expandable_segments", &[]),
    ("expandable_large_page_mb", &[]),
    ("lifetime_placement", &[]),
];

/// How alike a misspelt key and a valid one must be (Jaro–Winkler, 0..1) to be suggested.
const SUGGESTION_SIMILARITY: f64 = 0.8;

/// The key `key` (or its alias) stands for.
fn canonical(key: &str) -> Option<&'static str> {
    KEYS.iter()
        .find(|(name, aliases)| *name == key || aliases.contains(&key))
        .map(|(name, _)| *name)
}

/// The valid key (or alias) nearest to `key`, if one is near enough to be a likely typo.
pub(crate) fn nearest_key(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    KEYS.iter()
        .flat_map(|(name, aliases)| std::iter::once(name).chain(aliases.iter()))
        .map(|candidate| (strsim::jaro_winkler(&lower, candidate), *candidate))
        .filter(|(score, _)| *score >= SUGGESTION_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// The valid keys, comma separated (for error messages).
pub(crate) fn key_list() -> String {
    KEYS.iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl AllocatorConfig {
    /// Parses `key:value,key:value,...`. Keys: `max_split_size_mb`, `max_non_split_rounding_mb`,
    /// `large_segment_size_mb`, `roundup_power2_divisions` (a power of two, or a table such as
    /// `[64:8,128:2,256:2,512:2,1024:1,>:1]` keyed by MiB, each interval once: a second
    /// entry for an interval, `>` included, is refused), `garbage_collection_threshold`,
    /// `per_process_memory_fraction` (alias `memory_fraction`), `limit_mb` (at least 1),
    /// `cross_stream` (`manual` | `automatic`), `reuse_pending_with_wait`,
    /// `lazy_event_polling` (alias `multi_stream_lazy_reclaim`), `release_before_grow`,
    /// `split_large_remainders`, `fit_large_segments`, `record_history` (booleans),
    /// `history_size` (alias `max_entries`, at most [`MAX_HISTORY_SIZE`]),
    /// `expandable_segments`, `expandable_large_page_mb`, `lifetime_placement`.
    ///
    /// The whole string is read before anything is checked across keys, so the order of the
    /// keys never matters. A key given twice (directly or by an alias) is
    /// [`AllocError::DuplicateConfigKey`]; an unknown key is [`AllocError::UnknownConfigKey`],
    /// whose message suggests the nearest valid key; a bad value is
    /// [`AllocError::InvalidConfigValue`] naming the key and the value. Values that depend on
    /// the device (a large segment bigger than it) are checked when the allocator is made
    /// ([`AllocatorConfig::validate_for_device`]).
    pub fn parse(text: &str) -> Result<Self, AllocError> {
        let mut seen: Vec<(&'static str, &str)> = Vec::new();
        let mut config = AllocatorConfig::new();
        for item in split_top_level(text) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let Some((key, value)) = item.split_once(':') else {
                return Err(bad(item, "", "expected key:value"));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(name) = canonical(key) else {
                return Err(AllocError::UnknownConfigKey {
                    key: key.to_string(),
                });
            };
            if let Some((_, first)) = seen.iter().find(|(seen_name, _)| *seen_name == name) {
                return Err(AllocError::DuplicateConfigKey {
                    key: name.to_string(),
                    first: first.to_string(),
                    second: item.to_string(),
                });
            }
            seen.push((name, item));
            config.apply(name, key, value)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Reads [`ENV_VAR`] (`BRAID_ALLOC_CONF`); defaults when unset. A variable set to the
    /// empty string is an error (unset it for the defaults), as for every `BRAID_*`
    /// variable.
    pub fn from_env() -> Result<Self, AllocError> {
        match std::env::var(ENV_VAR) {
            Ok(text) if text.trim().is_empty() => Err(bad(
                ENV_VAR,
                &text,
                "set but empty: unset it for the defaults, or give key:value pairs",
            )),
            Ok(text) => Self::parse(&text),
            Err(std::env::VarError::NotPresent) => Ok(Self::new()),
            Err(std::env::VarError::NotUnicode(raw)) => {
                Err(bad(ENV_VAR, &raw.to_string_lossy(), "not valid unicode"))
            }
        }
    }

    /// Sets the setting `name` (a name of [`KEYS`]) from `value`, checking the value alone;
    /// errors name the key as the user wrote it (`key`).
    fn apply(&mut self, name: &str, key: &str, value: &str) -> Result<(), AllocError> {
        let mib = |value: &str| -> Result<u64, AllocError> {
            parse_u64(key, value)?
                .checked_mul(MIB)
                .ok_or_else(|| bad(key, value, "too large: it overflows 64-bit bytes"))
        };
        match name {
            "max_split_size_mb" => self.max_split_size = mib(value)?,
            "max_non_split_rounding_mb" => self.max_non_split_rounding = mib(value)?,
            "large_segment_size_mb" => self.large_segment_size = mib(value)?,
            "roundup_power2_divisions" => {
                self.roundup_power2_divisions = parse_divisions(key, value)?;
            }
            "garbage_collection_threshold" => {
                let t = parse_f64(key, value)?;
                if !(t > 0.0 && t < 1.0) {
                    return Err(bad(key, value, "must be in (0, 1)"));
                }
                self.garbage_collection_threshold = t;
            }
            "per_process_memory_fraction" => {
                let f = parse_f64(key, value)?;
                if !(f > 0.0 && f <= 1.0) {
                    return Err(bad(key, value, "must be in (0, 1]"));
                }
                self.memory_fraction = Some(f);
            }
            "limit_mb" => self.limit_bytes = Some(mib(value)?),
            "cross_stream" => {
                self.cross_stream = match value.to_ascii_lowercase().as_str() {
                    "manual" => CrossStreamMode::Manual,
                    "automatic" | "auto" => CrossStreamMode::Automatic,
                    _ => return Err(bad(key, value, "expected manual or automatic")),
                };
            }
            "reuse_pending_with_wait" => self.reuse_pending_with_wait = parse_bool(key, value)?,
            "lazy_event_polling" => self.lazy_event_polling = parse_bool(key, value)?,
            "release_before_grow" => self.release_before_grow = parse_bool(key, value)?,
            "split_large_remainders" => self.split_large_remainders = parse_bool(key, value)?,
            "fit_large_segments" => self.fit_large_segments = parse_bool(key, value)?,
            "lifetime_placement" => self.lifetime_placement = parse_bool(key, value)?,
            "record_history" => self.record_history = parse_bool(key, value)?,
            "history_size" => {
                let n = parse_u64(key, value)?;
                self.history_size = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= MAX_HISTORY_SIZE)
                    .ok_or_else(|| {
                        bad(key, value, &format!("must be at most {MAX_HISTORY_SIZE}"))
                    })?;
            }
            "expandable_segments" => self.expandable_segments = parse_bool(key, value)?,
            "expandable_large_page_mb" => self.expandable_large_page = Some(mib(value)?),
            _ => {
                return Err(AllocError::UnknownConfigKey {
                    key: key.to_string(),
                })
            }
        }
        Ok(())
    }
}

fn parse_u64(key: &str, value: &str) -> Result<u64, AllocError> {
    value
        .parse::<u64>()
        .map_err(|_| bad(key, value, "expected a non-negative integer"))
}

fn parse_f64(key: &str, value: &str) -> Result<f64, AllocError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| bad(key, value, "expected a number"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, AllocError> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(bad(key, value, "expected true or false")),
    }
}

/// Splits at commas outside brackets.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_divisions(key: &str, value: &str) -> Result<[u64; ROUNDUP_POWER2_INTERVALS], AllocError> {
    let mut table = [0u64; ROUNDUP_POWER2_INTERVALS];
    let division = |text: &str| -> Result<u64, AllocError> {
        let d = text
            .trim()
            .parse::<u64>()
            .map_err(|_| bad(key, value, "divisions must be integers"))?;
        if !d.is_power_of_two() {
            return Err(bad(key, value, "divisions must be powers of two"));
        }
        Ok(d)
    };
    let Some(inner) = value.strip_prefix('[') else {
        table = [division(value)?; ROUNDUP_POWER2_INTERVALS];
        return Ok(table);
    };
    let inner = inner
        .strip_suffix(']')
        .ok_or_else(|| bad(key, value, "missing ']'"))?;
    let mut last_index: Option<usize> = None;
    // Which entry set each interval: a later entry for the same interval is refused rather
    // than silently winning.
    let mut set_by: [Option<&str>; ROUNDUP_POWER2_INTERVALS] = [None; ROUNDUP_POWER2_INTERVALS];
    let mut rest_given = false;
    for entry in inner.split(',') {
        let (size, div) = entry.split_once(':').ok_or_else(|| {
            bad(
                key,
                value,
                "table entries are <size_mb>:<divisions> or >:<divisions>",
            )
        })?;
        let div = division(div)?;
        let size = size.trim();
        if size == ">" {
            if rest_given {
                return Err(bad(key, value, "the entry '>' is given twice"));
            }
            rest_given = true;
            let from = last_index.map_or(0, |i| i + 1);
            for (slot, by) in table.iter_mut().zip(set_by.iter_mut()).skip(from) {
                *slot = div;
                by.get_or_insert(">");
            }
            continue;
        }
        let mb = size
            .parse::<u64>()
            .map_err(|_| bad(key, value, "interval sizes must be integers (MiB)"))?;
        if !mb.is_power_of_two() {
            return Err(bad(key, value, "interval sizes must be powers of two"));
        }
        let index = (mb.ilog2() as usize).min(ROUNDUP_POWER2_INTERVALS - 1);
        if let Some(first) = set_by[index] {
            let interval = 1u64 << index;
            let reason = if first == size {
                format!("the interval of {interval} MiB is given twice")
            } else {
                format!(
                    "{size} MiB is in the interval of {interval} MiB, which '{first}' already \
                     sets: an interval is given twice"
                )
            };
            return Err(bad(key, value, &reason));
        }
        if last_index.is_none() {
            for slot in table.iter_mut().take(index) {
                *slot = div;
            }
        }
        table[index] = div;
        set_by[index] = Some(size);
        last_index = Some(index);
    }
    Ok(table)
}
