//! [`NodeSettings`]: every behaviour setting of a `cdc-server` node (profile
//! and timing), defined once. `cdc-server` parses it from flags or `CDC_*`
//! variables (clap), the harness builds it from a scenario's
//! `[cluster.timing]` and hands it to a container as [`NodeSettings::to_args`]
//! (`harness::cluster`), whose flag names come from the same clap definition
//! ([`NodeSettings::to_env`] gives the `CDC_*` variables of the same settings).
//!
//! Addresses (etcd, listen, advertise) are not settings: the cluster that
//! starts a node owns them.

use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser};
use serde::{Deserialize, Serialize};

use crate::coordinator::CoordinatorConfig;
use crate::profile::Profile;

/// How a node behaves. Defaults are TiCDC's where TiCDC has the setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Args)]
pub struct NodeSettings {
    /// Behaviour profile: pre-fix, fix or hardened.
    #[arg(long, env = "CDC_PROFILE", default_value = "hardened")]
    pub profile: Profile,
    /// Capture lease TTL in whole seconds (TiCDC default 10).
    #[arg(long, env = "CDC_TTL_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl_secs: u64,
    /// Delay before a departed node leaves the membership, in ms.
    #[arg(long, env = "CDC_REMOVAL_DELAY_MS", default_value_t = 5_000)]
    pub removal_delay_ms: u64,
    /// First retry backoff of a changefeed in warning, in ms.
    #[arg(long, env = "CDC_BACKOFF_INITIAL_MS", default_value_t = 10_000)]
    pub backoff_initial_ms: u64,
    /// Cap of the retry backoff, in ms.
    #[arg(long, env = "CDC_BACKOFF_MAX_MS", default_value_t = 600_000)]
    pub backoff_max_ms: u64,
    /// Fail a changefeed after this long in warning without progress, in ms.
    #[arg(long, env = "CDC_GIVE_UP_MS", default_value_t = 1_800_000)]
    pub give_up_ms: u64,
    /// How often an unfinished coordinator operator re-sends its command, in ms.
    #[arg(long, env = "CDC_OPERATOR_RESEND_MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    pub operator_resend_ms: u64,
    /// The node loop's tick (maintainer manager, orchestrator, coordinator), in ms.
    #[arg(long, env = "CDC_TICK_MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub tick_ms: u64,
    /// How often dispatcher managers report their watermark, in ms.
    #[arg(long, env = "CDC_HEARTBEAT_MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub heartbeat_ms: u64,
}

/// Parses only the settings, for [`NodeSettings::default`] and tests.
#[derive(Parser)]
struct SettingsOnly {
    #[command(flatten)]
    settings: NodeSettings,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings::from_args::<&str>([]).expect("the defaults parse")
    }
}

impl NodeSettings {
    /// Parses settings from `--flag=value` arguments alone (the process
    /// environment is not read: `cdc-server` reads it through its own flags).
    pub fn from_args<S: AsRef<str>>(
        args: impl IntoIterator<Item = S>,
    ) -> Result<NodeSettings, clap::Error> {
        let argv = std::iter::once("cdc-server".to_string())
            .chain(args.into_iter().map(|a| a.as_ref().to_string()));
        let m = SettingsOnly::command()
            .mut_args(|a| a.env(None::<&'static str>))
            .try_get_matches_from(argv)?;
        Ok(SettingsOnly::from_arg_matches(&m)?.settings)
    }

    /// `(variable, value)` of every setting, named by its clap definition.
    pub fn to_env(&self) -> Vec<(String, String)> {
        self.pairs()
            .into_iter()
            .map(|(arg, value)| {
                let env = arg
                    .get_env()
                    .and_then(|e| e.to_str())
                    .expect("every setting has a CDC_* variable");
                (env.to_string(), value)
            })
            .collect()
    }

    /// `--flag=value` of every setting.
    pub fn to_args(&self) -> Vec<String> {
        self.pairs()
            .into_iter()
            .map(|(arg, value)| {
                format!(
                    "--{}={value}",
                    arg.get_long().expect("every setting has a flag")
                )
            })
            .collect()
    }

    fn pairs(&self) -> Vec<(clap::Arg, String)> {
        let values = [
            ("profile", self.profile.to_string()),
            ("ttl_secs", self.ttl_secs.to_string()),
            ("removal_delay_ms", self.removal_delay_ms.to_string()),
            ("backoff_initial_ms", self.backoff_initial_ms.to_string()),
            ("backoff_max_ms", self.backoff_max_ms.to_string()),
            ("give_up_ms", self.give_up_ms.to_string()),
            ("operator_resend_ms", self.operator_resend_ms.to_string()),
            ("tick_ms", self.tick_ms.to_string()),
            ("heartbeat_ms", self.heartbeat_ms.to_string()),
        ];
        let cmd = SettingsOnly::command();
        let args: Vec<clap::Arg> = cmd
            .get_arguments()
            .filter(|a| a.get_id() != "help")
            .cloned()
            .collect();
        // A field added to the struct and not here fails `every_setting_reaches_a_container`.
        values
            .into_iter()
            .filter_map(|(id, v)| {
                args.iter()
                    .find(|a| a.get_id() == id)
                    .map(|a| (a.clone(), v))
            })
            .collect()
    }

    /// Checks relations between settings that clap cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.backoff_initial_ms > self.backoff_max_ms {
            return Err(format!(
                "the first backoff ({} ms) is above the backoff cap ({} ms)",
                self.backoff_initial_ms, self.backoff_max_ms
            ));
        }
        Ok(())
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_secs)
    }

    pub fn removal_delay(&self) -> Duration {
        Duration::from_millis(self.removal_delay_ms)
    }

    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.tick_ms)
    }

    /// The coordinator's share of the settings.
    pub fn coordinator(&self) -> CoordinatorConfig {
        CoordinatorConfig {
            backoff_initial_ms: self.backoff_initial_ms,
            backoff_max_ms: self.backoff_max_ms,
            give_up_ms: self.give_up_ms,
            operator_resend_ms: self.operator_resend_ms,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_reaches_a_container() {
        let s = NodeSettings {
            profile: Profile::PreFix,
            ttl_secs: 3,
            removal_delay_ms: 1500,
            backoff_initial_ms: 2000,
            backoff_max_ms: 4000,
            give_up_ms: 60_000,
            operator_resend_ms: 250,
            tick_ms: 50,
            heartbeat_ms: 100,
        };
        let flags = SettingsOnly::command()
            .get_arguments()
            .filter(|a| a.get_id() != "help")
            .count();
        assert_eq!(s.to_env().len(), flags, "a setting has no value in pairs()");
        assert!(s.to_env().iter().all(|(k, _)| k.starts_with("CDC_")));
        assert_eq!(NodeSettings::from_args(s.to_args()).unwrap(), s);
        assert_ne!(NodeSettings::default(), s);
    }

    #[test]
    fn bad_settings_are_refused() {
        for bad in [
            "--ttl-secs=0",
            "--tick-ms=0",
            "--profile=bogus",
            "--give-up-ms=-1",
        ] {
            assert!(NodeSettings::from_args([bad]).is_err(), "{bad} accepted");
        }
        let s = NodeSettings {
            backoff_initial_ms: 5,
            backoff_max_ms: 1,
            ..Default::default()
        };
        assert!(s.check().unwrap_err().contains("above the backoff cap"));
    }
}
