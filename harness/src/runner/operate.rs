//! The runner's side of operations: a user's act in the timeline (pause,
//! resume, move, create and remove a changefeed; add and remove a node) is
//! dispatched here, the way a fault goes to its nemesis
//! (`nemesis::Injector`). The API requests themselves are
//! [`super::operation`]'s; what spans steps (a removed changefeed's
//! checkpoint for its re-creation, a removed node's open faults) is kept on
//! the runner.

use std::time::Duration;

use anyhow::{anyhow, Result};

use super::{deadline, operation, provision, Runner, StepDone};
use crate::run_model::{OperationAnswer, OperationRecord, ResolvedTarget, StepOutcome};
use crate::scenario::{StepKind, Target};
use crate::slot::Slot;

impl Runner<'_> {
    /// Carries out the operation step `kind` (a step whose
    /// [`StepKind::is_operation`] holds).
    pub(super) async fn operation(&mut self, kind: &StepKind) -> Result<StepDone> {
        match kind {
            StepKind::PauseChangefeed { changefeed } => {
                self.operate(operation::Request::Pause(changefeed.clone()), None)
                    .await
            }
            StepKind::ResumeChangefeed { changefeed } => {
                self.operate(operation::Request::Resume(changefeed.clone()), None)
                    .await
            }
            StepKind::MoveChangefeed { changefeed, target } => {
                let to = self.resolve(target).await?;
                let req = operation::Request::Move(changefeed.clone(), to.node_id.clone());
                self.operate(req, Some(to)).await
            }
            StepKind::CreateChangefeed { changefeed } => {
                let start = match self.removed_feeds.remove(changefeed) {
                    Some(at_removal) => {
                        // The highest checkpoint anyone saw (the observer's
                        // samples too): a user creates it again from the
                        // checkpoint they last saw, never from an older one.
                        let listed = self.removal_over(changefeed, at_removal).await;
                        let sampled = self
                            .observer
                            .as_ref()
                            .map(|o| o.samples_snapshot())
                            .unwrap_or_default()
                            .iter()
                            .flat_map(|s| s.changefeeds.iter())
                            .filter(|c| &c.name == changefeed)
                            .map(|c| c.checkpoint_ts)
                            .max()
                            .unwrap_or(0);
                        listed.max(sampled)
                    }
                    None => self.start_ts,
                };
                let body = provision::create_request(self.sc, changefeed, start)?;
                self.say(format_args!("  creating {changefeed} from ts {start}"));
                self.operate(operation::Request::Create(body), None).await
            }
            StepKind::RemoveChangefeed { changefeed } => self.remove_changefeed(changefeed).await,
            StepKind::AddNode {} => self.add_node().await,
            StepKind::RemoveNode { target } => self.remove_node(target).await,
            other => Err(anyhow!("`{}` is not an operation", other.action())),
        }
    }

    /// Scale out: a node in the next slot, observed from now on.
    async fn add_node(&mut self) -> Result<StepDone> {
        let node = self.w.cluster.add_node().await?;
        let (name, api) = (node.name.clone(), node.api.clone());
        let slot = Slot::at_index(self.w.cluster.nodes().len() - 1);
        self.w.probe.add_node(slot, api);
        let node_id = self
            .w
            .get_node::<cdc_system::api::Health>(slot, "/api/v2/health")
            .await
            .map(|h| h.id.to_string())
            .unwrap_or_else(|| "unknown".into());
        self.say(format_args!("  {name} started as {node_id}"));
        Ok(StepDone {
            target: Some(ResolvedTarget {
                spec: "new".into(),
                node: slot.number(),
                node_id,
            }),
            ..StepDone::done()
        })
    }

    /// Scale in: the faults open on the node itself are settled first (a
    /// killed node stays down and is removed as it is; a paused one is
    /// unpaused, its failpoints cleared), then it is stopped for good and no
    /// longer observed.
    async fn remove_node(&mut self, target: &Target) -> Result<StepDone> {
        let t = self.resolve(target).await?;
        let slot = Slot::new(t.node).ok_or_else(|| anyhow!("no slot {}", t.node))?;
        let mut down = false;
        for (fid, is_down) in self.open.on_slot(slot) {
            self.settled.insert(fid.clone());
            if is_down {
                self.open.remove(&fid);
                self.close_window(&fid);
                down = true;
            } else {
                self.say(format_args!(
                    "  healing `{fid}` on {slot} before removing it"
                ));
                self.heal(&fid).await?;
            }
        }
        if !down {
            self.w.cluster.remove_node(slot).await?;
        }
        self.w.probe.remove_node(slot);
        Ok(StepDone {
            target: Some(t),
            ..StepDone::done()
        })
    }

    /// Removes a changefeed: the step ends once the coordinator took the
    /// request (the removal itself may wait on a slow node); the checkpoint
    /// it had then is where a later `create_changefeed` starts, raised by
    /// whatever the coordinator still lists until the removal is over.
    async fn remove_changefeed(&mut self, cf: &str) -> Result<StepDone> {
        let before = self.w.view().await;
        let checkpoint = before
            .changefeed(cf)
            .map(|c| c.checkpoint_tso)
            .unwrap_or(self.start_ts);
        let done = self
            .operate(operation::Request::Remove(cf.to_string()), None)
            .await?;
        self.removed_feeds.insert(cf.to_string(), checkpoint);
        Ok(done)
    }

    /// Before a removed changefeed is created again: waits (at most
    /// [`operation::CREATE_TIMEOUT`]) until the coordinator no longer lists
    /// it, and returns the highest checkpoint it listed meanwhile.
    async fn removal_over(&mut self, cf: &str, mut checkpoint: u64) -> u64 {
        let gone = deadline::until(
            &mut (&mut *self, &mut checkpoint),
            operation::CREATE_TIMEOUT,
            Duration::from_millis(300),
            |(r, checkpoint)| {
                Box::pin(async move {
                    let v = r.w.view().await;
                    match v.changefeed(cf) {
                        Some(c) => {
                            **checkpoint = (**checkpoint).max(c.checkpoint_tso);
                            None
                        }
                        // Gone only when a coordinator answered the list.
                        None => v.lists_changefeeds().then_some(()),
                    }
                })
            },
        )
        .await;
        if gone.is_none() {
            self.say(format_args!(
                "  {cf} is still listed {} s after its removal was accepted",
                operation::CREATE_TIMEOUT.as_secs()
            ));
        }
        checkpoint
    }

    /// Carries out a user's operation (see [`operation`]) and records the
    /// request and its answer in `run.json`. An acknowledgement is done; a
    /// refusal or a "retry later" until the timeout kept the step from being
    /// exercised (the *operations* checker judges whether the refusal
    /// contradicts an earlier acknowledgement); no answer at all is the
    /// harness's failure to carry out the step.
    async fn operate(
        &mut self,
        req: operation::Request,
        target: Option<ResolvedTarget>,
    ) -> Result<StepDone> {
        let sent_ms = self.w.clock.now_ms();
        let taken = operation::perform(&self.w, &req).await?;
        let (op, changefeed, to) = req.describe();
        self.run.operations.push(OperationRecord {
            step: self.run.steps.len(),
            op,
            changefeed,
            target: to,
            sent_ms,
            answered_ms: self.w.clock.now_ms(),
            tries: taken.tries,
            answer: taken.answer.clone(),
        });
        if taken.tries > 1 {
            self.say(format_args!("  answered after {} tries", taken.tries));
        }
        let message = match taken.answer {
            OperationAnswer::Acknowledged => None,
            OperationAnswer::NoOp { message } => {
                self.say(format_args!("  nothing to do: {message}"));
                None
            }
            OperationAnswer::Refused { status, message } => {
                Some(format!("refused by the system ({status}): {message}"))
            }
            OperationAnswer::Declined { message } => Some(message),
            OperationAnswer::Unanswered { message } => return Err(anyhow!(message)),
        };
        if let Some(message) = message {
            self.say(format_args!("  declined by the system: {message}"));
            return Ok(StepDone {
                outcome: StepOutcome::NotExercised { message },
                target,
                effects: Vec::new(),
            });
        }
        Ok(StepDone {
            target,
            ..StepDone::done()
        })
    }
}
