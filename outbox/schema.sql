-- outbox_message: transactional outbox of github.com/seckillkit/seckill/outbox.
-- MySQL 8.0+ / MariaDB 10.6+ (SKIP LOCKED). Equivalent to outbox.AutoMigrate on
-- MySQL; outbox.Schema("mysql", outbox.WithTable(name)) gives this DDL for
-- another table name.
--
-- Lifecycle: written PENDING inside the business transaction (Writer.Write)
-- -> a relay leases it (lease_owner, next_attempt_at = lease end, attempts+1)
-- -> SENT (sent_at) | PENDING again with next_attempt_at = now + backoff
-- | FAILED after the attempt budget. SENT rows older than the retention are
-- deleted by the relay; FAILED rows stay for an operator.
--
-- The key column is msg_key because KEY is reserved. utf8mb4_bin makes
-- topic/key comparisons byte-exact, as on SQLite.
CREATE TABLE IF NOT EXISTS `outbox_message` (
  `id`              BIGINT        NOT NULL AUTO_INCREMENT,
  `msg_id`          VARCHAR(64)   NOT NULL,               -- dedup ID consumers use; stable across redeliveries
  `topic`           VARCHAR(255)  NOT NULL,
  `msg_key`         VARCHAR(255)  NOT NULL DEFAULT '',    -- partition key, free-form
  `ref`             VARCHAR(255)  NOT NULL DEFAULT '',    -- application reference (reservation ID), not sent
  `payload`         LONGBLOB      NULL,
  `headers`         TEXT          NULL,                   -- JSON object of string -> string
  `status`          VARCHAR(16)   NOT NULL DEFAULT 'PENDING', -- PENDING | SENT | FAILED
  `attempts`        INT           NOT NULL DEFAULT 0,     -- publish attempts started
  `next_attempt_at` DATETIME(6)   NOT NULL,               -- due time; lease end while claimed (UTC)
  `lease_owner`     VARCHAR(64)   NOT NULL DEFAULT '',    -- claim token of the batch holding the row (SENT: that marked it)
  `last_error`      VARCHAR(1024) NOT NULL DEFAULT '',
  `created_at`      DATETIME(6)   NOT NULL,
  `updated_at`      DATETIME(6)   NOT NULL,
  `sent_at`         DATETIME(6)   NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_outbox_message_msg_id` (`msg_id`),
  KEY `idx_outbox_message_poll` (`status`, `next_attempt_at`),          -- relay poll + SKIP LOCKED
  KEY `idx_outbox_message_sent` (`sent_at`),                            -- retention clean-up
  KEY `idx_outbox_message_topic_key` (`topic`, `msg_key`),              -- HasPending / Pending
  KEY `idx_outbox_message_ref` (`ref`)                                  -- HasPendingRef
  -- status is only in the poll index: marking a row SENT rewrites two
  -- secondary index entries (poll, sent_at).
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
