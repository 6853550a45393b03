//! The statement of each write, sent once its precondition held (the checked way) or
//! guarded by itself (the short way).

use holdpoint_protocol::Grant;

use super::GroupError;
use super::session::{Answer, Session, one, parent};
use super::statements::{
    DELETE_RECORD, DELETE_RECORDS, FORGET_IDEMPOTENT, INSERT_GRANT, INSERT_HOLD, INSERT_IDEMPOTENT,
    INSERT_RECORD, REVOKE_GRANT, UPDATE_HOLD, UPDATE_RECORD,
};
use crate::pg::pipeline::Step;
use crate::rows::PreparedWrite;

impl<'s> Session<'s> {
    /// The statement of one write whose precondition held; `grant` is the stored grant a
    /// revocation's check read.
    pub(super) fn write<'a>(
        &self,
        w: &'a PreparedWrite,
        grant: Option<String>,
    ) -> Result<Step<'a, Answer, GroupError>, GroupError>
    where
        's: 'a,
    {
        let client = self.client;
        Ok(match w {
            PreparedWrite::InsertHold(r) => {
                let insert = self.statement(INSERT_HOLD)?;
                let version = r.version as i64;
                Box::pin(async move {
                    client
                        .execute(
                            &insert,
                            &[
                                r.id.as_uuid(),
                                r.batch.as_uuid(),
                                &r.world,
                                &r.raiser,
                                &r.chat,
                                &r.agent,
                                &r.tool,
                                &r.kind,
                                &r.status,
                                &r.open,
                                &r.deadline,
                                &r.remind_at,
                                &version,
                                &r.data,
                            ],
                        )
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::UpdateHold(r) => {
                let update = self.statement(UPDATE_HOLD)?;
                let (version, previous) = (r.version as i64, r.version as i64 - 1);
                Box::pin(async move {
                    let changed = client
                        .execute(
                            &update,
                            &[
                                &r.status,
                                &r.open,
                                &r.remind_at,
                                &version,
                                &r.data,
                                r.id.as_uuid(),
                                &previous,
                            ],
                        )
                        .await?;
                    one(changed, "a hold's update")
                })
            }
            PreparedWrite::InsertGrant { id, world, data } => {
                let insert = self.statement(INSERT_GRANT)?;
                Box::pin(async move {
                    client
                        .execute(&insert, &[id.as_uuid(), world, data])
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::RevokeGrant { id, at } => {
                let revoke = self.statement(REVOKE_GRANT)?;
                let data =
                    grant.ok_or_else(|| GroupError::Unexpected(format!("grant {id} is gone")))?;
                let unreadable =
                    |e: serde_json::Error| GroupError::Unexpected(format!("grant {id}: {e}"));
                let mut grant: Grant = serde_json::from_str(&data).map_err(unreadable)?;
                grant.revoked_at = Some(*at);
                let data = serde_json::to_string(&grant).map_err(unreadable)?;
                let millis = at.as_millis();
                Box::pin(async move {
                    client
                        .execute(&revoke, &[&millis, &data, id.as_uuid()])
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::PutRecord(r) if r.version == 1 => {
                let insert = self.statement(INSERT_RECORD)?;
                let (parent, version) = (parent(r), r.version as i64);
                Box::pin(async move {
                    client
                        .execute(
                            &insert,
                            &[&r.kind, &r.id, &parent, &r.key, &version, &r.data],
                        )
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::PutRecord(r) => {
                let update = self.statement(UPDATE_RECORD)?;
                let (version, previous) = (r.version as i64, r.version as i64 - 1);
                Box::pin(async move {
                    let changed = client
                        .execute(
                            &update,
                            &[&r.key, &version, &r.data, &r.kind, &r.id, &previous],
                        )
                        .await?;
                    one(changed, "a record's update")
                })
            }
            PreparedWrite::DeleteRecord { kind, id } => {
                let delete = self.statement(DELETE_RECORD)?;
                Box::pin(async move {
                    client.execute(&delete, &[kind, id]).await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::DeleteRecords { kind, parent } => {
                let delete = self.statement(DELETE_RECORDS)?;
                Box::pin(async move {
                    client.execute(&delete, &[kind, parent]).await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::PutIdempotent {
                key,
                fingerprint,
                response,
                at,
            } => {
                let insert = self.statement(INSERT_IDEMPOTENT)?;
                let millis = at.as_millis();
                Box::pin(async move {
                    client
                        .execute(&insert, &[key, fingerprint, response, &millis])
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::ForgetIdempotent { key, before } => {
                let delete = self.statement(FORGET_IDEMPOTENT)?;
                let millis = before.as_millis();
                Box::pin(async move {
                    client.execute(&delete, &[key, &millis]).await?;
                    Ok(Answer::Applied)
                })
            }
        })
    }
}
