//! The Kafka broker stops gracefully and starts again.

use std::time::Duration;

use anyhow::{Context, Result};

use super::fault::{not_mine, Fault, Injected, Nemesis, OpenFault};
use crate::run_model::{Effect, EffectKind};
use crate::runner::world::World;

pub struct Broker;

const START_TIMEOUT: Duration = Duration::from_secs(90);

impl Nemesis for Broker {
    async fn inject(&self, w: &World, _f: &Fault<'_>) -> Result<Injected> {
        w.cluster.stop_kafka().await?;
        Ok(Injected {
            open: Some(OpenFault::KafkaDown),
            ..Default::default()
        })
    }

    async fn heal(&self, w: &World, open: &OpenFault) -> Result<Vec<Effect>> {
        let OpenFault::KafkaDown = open else {
            return Err(not_mine("kafka", open));
        };
        w.cluster
            .start_kafka(START_TIMEOUT)
            .await
            .context("Kafka did not come back")?;
        Ok(vec![w.effect(EffectKind::BrokerRestarted)])
    }
}
