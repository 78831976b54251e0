//! The allocator configuration a command uses: `--conf` where the command has it and it is
//! given, else `BRAID_ALLOC_CONF`, else the defaults.
//!
//! `--conf` wins over the variable, but a set variable is still parsed: a malformed
//! `BRAID_ALLOC_CONF` (or one set to nothing, which braid never reads as unset) is an error
//! naming the variable and the key even when `--conf` overrides it, so a broken environment
//! never goes unnoticed. [`AllocConf::describe`] is the line the
//! commands print to say which configuration they used.

use braid::allocator::{AllocError, AllocatorConfig, ENV_VAR};
use std::ffi::OsString;
use std::fmt;

/// Where the configuration came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// The command's `--conf` option.
    Flag,
    /// The `BRAID_ALLOC_CONF` environment variable.
    Env,
    /// Neither was given: the allocator's defaults.
    Defaults,
}

/// The configuration a command uses, and where it came from.
#[derive(Clone, Debug)]
pub struct AllocConf {
    /// The configuration string used (`None` for the defaults).
    pub text: Option<String>,
    /// Where `text` came from.
    pub source: Source,
    /// `text` parsed.
    pub config: AllocatorConfig,
    /// The value of `BRAID_ALLOC_CONF` when it was set but `--conf` won.
    pub overridden_env: Option<String>,
}

/// A configuration that does not parse, with where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfError {
    /// `--conf` is malformed.
    #[error("--conf: {0}")]
    Flag(#[source] AllocError),
    /// `BRAID_ALLOC_CONF` is malformed (or not unicode).
    #[error("{ENV_VAR}: {0}")]
    Env(#[source] AllocError),
}

impl AllocConf {
    /// Resolves the configuration from `flag` (the command's `--conf`, if it has one) and
    /// `env` (the value of `BRAID_ALLOC_CONF`, `None` when unset).
    pub fn resolve(flag: Option<&str>, env: Option<OsString>) -> Result<AllocConf, ConfError> {
        let env = env
            .map(|raw| {
                raw.into_string().map_err(|raw| {
                    ConfError::Env(AllocError::InvalidConfigValue {
                        key: ENV_VAR.to_string(),
                        value: raw.to_string_lossy().into_owned(),
                        reason: "not valid unicode".to_string(),
                    })
                })
            })
            .transpose()?;
        // braid's rule for every `BRAID_*` variable: set to nothing is an error, not unset.
        if let Some(text) = env.as_deref().filter(|t| t.trim().is_empty()) {
            return Err(ConfError::Env(AllocError::InvalidConfigValue {
                key: ENV_VAR.to_string(),
                value: text.to_string(),
                reason: "set but empty: unset it for the defaults, or give key:value pairs"
                    .to_string(),
            }));
        }
        let env_config = env
            .as_deref()
            .map(AllocatorConfig::parse)
            .transpose()
            .map_err(ConfError::Env)?;
        if let Some(text) = flag {
            let config = AllocatorConfig::parse(text).map_err(ConfError::Flag)?;
            return Ok(AllocConf {
                text: Some(text.to_string()),
                source: Source::Flag,
                config,
                overridden_env: env,
            });
        }
        Ok(match (env, env_config) {
            (Some(text), Some(config)) => AllocConf {
                text: Some(text),
                source: Source::Env,
                config,
                overridden_env: None,
            },
            _ => AllocConf {
                text: None,
                source: Source::Defaults,
                config: AllocatorConfig::new(),
                overridden_env: None,
            },
        })
    }

    /// [`resolve`](Self::resolve) with the process's `BRAID_ALLOC_CONF`.
    pub fn from_env(flag: Option<&str>) -> Result<AllocConf, ConfError> {
        Self::resolve(flag, std::env::var_os(ENV_VAR))
    }

    /// One line saying which configuration is used and where it came from.
    pub fn describe(&self) -> Description<'_> {
        Description(self)
    }
}

/// [`AllocConf::describe`]'s line.
pub struct Description<'a>(&'a AllocConf);

impl fmt::Display for Description<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let conf = self.0;
        let text = conf.text.as_deref().unwrap_or_default();
        match conf.source {
            Source::Flag => write!(f, "allocator configuration: `{text}` from --conf")?,
            Source::Env => write!(f, "allocator configuration: `{text}` from {ENV_VAR}")?,
            Source::Defaults => write!(f, "allocator configuration: defaults ({ENV_VAR} unset)")?,
        }
        if let Some(env) = &conf.overridden_env {
            write!(f, " ({ENV_VAR}=`{env}` overridden)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(text: &str) -> Option<OsString> {
        Some(OsString::from(text))
    }

    #[test]
    fn the_flag_wins_over_the_variable_and_says_so() {
        let conf =
            AllocConf::resolve(Some("max_split_size_mb:200"), os("max_split_size_mb:64")).unwrap();
        assert_eq!(conf.source, Source::Flag);
        assert_eq!(conf.text.as_deref(), Some("max_split_size_mb:200"));
        assert_eq!(conf.config.max_split_size, 200 << 20);
        assert_eq!(
            conf.describe().to_string(),
            "allocator configuration: `max_split_size_mb:200` from --conf \
             (BRAID_ALLOC_CONF=`max_split_size_mb:64` overridden)"
        );
    }

    #[test]
    fn the_variable_is_used_without_the_flag_and_defaults_without_either() {
        let env = AllocConf::resolve(None, os("max_split_size_mb:64")).unwrap();
        assert_eq!(env.source, Source::Env);
        assert_eq!(env.config.max_split_size, 64 << 20);
        assert_eq!(
            env.describe().to_string(),
            "allocator configuration: `max_split_size_mb:64` from BRAID_ALLOC_CONF"
        );
        let none = AllocConf::resolve(None, None).unwrap();
        assert_eq!(none.source, Source::Defaults);
        assert_eq!(none.text, None);
        assert_eq!(
            none.describe().to_string(),
            "allocator configuration: defaults (BRAID_ALLOC_CONF unset)"
        );
    }

    #[test]
    fn malformed_values_are_errors_naming_the_source_and_the_key() {
        let err = AllocConf::resolve(None, os("max_split_size_mb:abc")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("BRAID_ALLOC_CONF: ") && msg.contains("'max_split_size_mb'"),
            "{msg}"
        );
        // Overridden by --conf, a malformed variable is still reported.
        let err = AllocConf::resolve(Some("max_split_size_mb:200"), os("bogus_key:1")).unwrap_err();
        assert!(matches!(err, ConfError::Env(_)), "{err}");
        assert!(err.to_string().contains("bogus_key"), "{err}");
        let err = AllocConf::resolve(Some("no_such_key:1"), None).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("--conf: ") && msg.contains("no_such_key"),
            "{msg}"
        );
    }

    #[test]
    fn a_variable_set_to_nothing_is_an_error_even_under_the_flag() {
        for flag in [None, Some("max_split_size_mb:200")] {
            let err = AllocConf::resolve(flag, os(" ")).unwrap_err();
            assert!(matches!(err, ConfError::Env(_)), "{err}");
            let msg = err.to_string();
            assert!(
                msg.starts_with("BRAID_ALLOC_CONF: ") && msg.contains("set but empty"),
                "{msg}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_variable_that_is_not_unicode_is_an_error() {
        use std::os::unix::ffi::OsStringExt;
        let raw = OsString::from_vec(vec![0x66, 0xff]);
        let err = AllocConf::resolve(None, Some(raw)).unwrap_err();
        assert!(err.to_string().contains("not valid unicode"), "{err}");
    }
}
