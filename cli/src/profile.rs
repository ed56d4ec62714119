//! Saved profiles: `$LATCHKEY_CONFIG_DIR/config.toml` (default: the user's config
//! directory + `latchkey/`), written with mode 0600 because it holds API tokens.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::CliError;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Profile {
    pub url: String,
    pub token: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Profiles {
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

fn config_path() -> Result<PathBuf, CliError> {
    let dir = match std::env::var_os("LATCHKEY_CONFIG_DIR") {
        Some(d) => PathBuf::from(d),
        None => dirs::config_dir()
            .ok_or_else(|| CliError::Config("no config directory; set LATCHKEY_CONFIG_DIR".into()))?
            .join("latchkey"),
    };
    Ok(dir.join("config.toml"))
}

impl Profiles {
    pub fn load() -> Result<Profiles, CliError> {
        let path = config_path()?;
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| CliError::Config(format!("{} is invalid: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Profiles::default()),
            Err(e) => Err(CliError::Config(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    pub fn save(&self) -> Result<PathBuf, CliError> {
        let path = config_path()?;
        let io =
            |e: std::io::Error| CliError::Config(format!("cannot write {}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let text = toml::to_string_pretty(self).map_err(|e| CliError::Config(e.to_string()))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&path).map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        Ok(path)
    }
}
