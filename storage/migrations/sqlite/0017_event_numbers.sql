-- Event ids are numbered per organization (`org_seq`, from the organization's
-- `event_seq`), no longer by the server-wide `seq`, whose gaps showed one tenant how much
-- every other one wrote. `seq` stays the outbox's internal order. Events already written
-- keep their numbers as ids, and every organization goes on from the highest, so no id is
-- ever given twice.
ALTER TABLE events ADD COLUMN org_seq BIGINT;
UPDATE events SET org_seq = seq;
ALTER TABLE organizations ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
UPDATE organizations SET event_seq = (SELECT COALESCE(MAX(seq), 0) FROM events);
CREATE INDEX events_org_seq ON events(org_id, org_seq);
-- A delivery shows its event's number (it outlives the event, pruned after its retention).
ALTER TABLE deliveries ADD COLUMN number BIGINT;
UPDATE deliveries SET number = seq;
