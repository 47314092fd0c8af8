-- outbox_message: transactional outbox of github.com/seckillkit/seckill/outbox.
-- PostgreSQL 9.5+ (SKIP LOCKED, CREATE INDEX IF NOT EXISTS). Equivalent to
-- outbox.AutoMigrate on PostgreSQL; outbox.Schema("postgres", outbox.WithTable(name))
-- gives this DDL for another table name.
--
-- Lifecycle: written PENDING inside the business transaction (Writer.Write)
-- -> a relay leases it (lease_owner, next_attempt_at = lease end, attempts+1)
-- -> SENT (sent_at) | PENDING again with next_attempt_at = now + backoff
-- | FAILED after the attempt budget. SENT rows older than the retention are
-- deleted by the relay; FAILED rows stay for an operator.
--
-- Index names are per schema on PostgreSQL, so they carry the table's name.
-- Timestamps are TIMESTAMPTZ with microseconds, written in UTC.
CREATE TABLE IF NOT EXISTS "outbox_message" (
  "id"              BIGSERIAL      NOT NULL,
  "msg_id"          VARCHAR(64)    NOT NULL,               -- dedup ID consumers use; stable across redeliveries
  "topic"           VARCHAR(255)   NOT NULL,
  "msg_key"         VARCHAR(255)   NOT NULL DEFAULT '',    -- partition key, free-form
  "ref"             VARCHAR(255)   NOT NULL DEFAULT '',    -- application reference (reservation ID), not sent
  "payload"         BYTEA          NULL,
  "headers"         TEXT           NULL,                   -- JSON object of string -> string
  "status"          VARCHAR(16)    NOT NULL DEFAULT 'PENDING', -- PENDING | SENT | FAILED
  "attempts"        INTEGER        NOT NULL DEFAULT 0,     -- publish attempts started
  "next_attempt_at" TIMESTAMPTZ(6) NOT NULL,               -- due time; lease end while claimed
  "lease_owner"     VARCHAR(64)    NOT NULL DEFAULT '',    -- claim token of the batch holding the row (SENT: that marked it)
  "last_error"      VARCHAR(1024)  NOT NULL DEFAULT '',
  "created_at"      TIMESTAMPTZ(6) NOT NULL,
  "updated_at"      TIMESTAMPTZ(6) NOT NULL,
  "sent_at"         TIMESTAMPTZ(6) NULL,
  PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX IF NOT EXISTS "uk_outbox_message_msg_id" ON "outbox_message" ("msg_id");
CREATE INDEX IF NOT EXISTS "idx_outbox_message_poll" ON "outbox_message" ("status", "next_attempt_at"); -- relay poll + SKIP LOCKED
CREATE INDEX IF NOT EXISTS "idx_outbox_message_sent" ON "outbox_message" ("sent_at");                  -- retention clean-up
CREATE INDEX IF NOT EXISTS "idx_outbox_message_topic_key" ON "outbox_message" ("topic", "msg_key");    -- HasPending / Pending
CREATE INDEX IF NOT EXISTS "idx_outbox_message_ref" ON "outbox_message" ("ref");                       -- HasPendingRef
-- status is only in the poll index: marking a row SENT rewrites two
-- secondary index entries (poll, sent_at).
