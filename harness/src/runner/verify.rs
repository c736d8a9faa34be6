//! Verification at the end of a run: each changefeed's topic against the
//! upstream at its final checkpoint, and every checkpoint observed audited
//! against what Kafka held then.

use anyhow::{Context, Result};

use super::audit;
use super::provision::{changefeed_tables, topic_of};
use super::world::World;
use crate::run_model::{DataFindings, Sample};
use crate::scenario::Scenario;
use crate::verifier;

pub async fn verify(w: &World, sc: &Scenario, samples: &[Sample]) -> Result<DataFindings> {
    let mut all = DataFindings::default();
    let mut finals = Vec::new();
    for (i, cf) in sc.changefeeds.iter().enumerate() {
        let seen: Vec<audit::SeenCheckpoint> = samples
            .iter()
            .flat_map(|s| {
                s.changefeeds
                    .iter()
                    .filter(|c| &c.name == cf)
                    .map(move |c| audit::SeenCheckpoint {
                        t_ms: s.t_ms,
                        changefeed: cf.clone(),
                        checkpoint_ts: c.checkpoint_ts,
                    })
            })
            .collect();
        let final_cp = seen.last().map(|s| s.checkpoint_ts).unwrap_or(0);
        finals.push(final_cp);
        let tables = changefeed_tables(sc, i);
        let (kafka, truth) = verifier::read_live(
            w.cluster.verifier_bootstrap(),
            &topic_of(cf),
            w.cluster.upstream_endpoint()?,
            &tables,
        )
        .await
        .with_context(|| format!("reading {cf}'s topic and ground truth"))?;
        let changes: Vec<verifier::Change> = kafka.iter().map(|(c, _)| c.clone()).collect();
        let report = verifier::verify(&changes, &truth, final_cp);
        w.say(format_args!("  {cf}: {}", report.summary()));
        let f = verifier::data_findings(&report);
        let audits = audit::audit(cf, &seen, &truth, &kafka, w.clock.started_at_ms, 20);
        let dishonest = audits.iter().filter(|a| !a.missing.is_empty()).count();
        w.say(format_args!(
            "  {cf}: {} distinct checkpoints audited, {dishonest} dishonest",
            audits.len()
        ));
        all.missing.extend(f.missing);
        all.order_violations.extend(f.order_violations);
        all.duplicates += f.duplicates;
        all.final_image_mismatches.extend(f.final_image_mismatches);
        all.unexpected.extend(f.unexpected);
        all.checkpoint_audits.extend(audits);
    }
    all.final_checkpoint_ts = finals.into_iter().min().unwrap_or(0);
    Ok(all)
}
