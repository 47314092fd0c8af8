-- seckill order tables for MySQL 8 / MariaDB 10.6+ (InnoDB, utf8mb4).
-- Equivalent to order.AutoMigrate on MySQL; kept for DBAs who manage DDL by
-- hand. order.Schema("mysql", order.WithTables(...)) gives this DDL for other
-- table names (index and constraint names are then derived from them).

CREATE TABLE IF NOT EXISTS `seckill_activity` (
  id             VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- the activity ID (order.ValidID), as in stock and the messages
  name           VARCHAR(128)  NOT NULL DEFAULT '',
  product_id     BIGINT        NOT NULL DEFAULT 0,
  product_name   VARCHAR(255)  NOT NULL DEFAULT '',
  original_price DECIMAL(12,2) NOT NULL DEFAULT 0,
  activity_price DECIMAL(12,2) NOT NULL DEFAULT 0,
  total_stock    BIGINT        NOT NULL DEFAULT 0,
  stock          BIGINT        NOT NULL DEFAULT 0,   -- guarded: UPDATE … SET stock = stock - n WHERE id = ? AND stock >= n
  user_limit     BIGINT        NOT NULL DEFAULT 1,   -- per-user cap; 1 turns on live_slot below
  version        BIGINT        NOT NULL DEFAULT 0,
  status         TINYINT       NOT NULL DEFAULT 1,
  start_time     DATETIME(3)   NOT NULL,
  end_time       DATETIME(3)   NOT NULL,
  created_at     DATETIME(3)   NULL,
  updated_at     DATETIME(3)   NULL,
  PRIMARY KEY (id),
  CONSTRAINT `chk_stock_nonneg` CHECK (stock >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `seckill_order` (
  id             BIGINT        NOT NULL,             -- snowflake (order.IDGenerator)
  order_no       VARCHAR(32)   NOT NULL,
  reservation_id VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- one order per Redis reservation (order.ValidReservationID)
  user_id        VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- order.ValidID: compared byte for byte, as in Redis
  activity_id    VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  live_slot      TINYINT       NULL,                 -- 1 while live and user_limit = 1, else NULL
  qty            BIGINT        NOT NULL,
  price          DECIMAL(12,2) NOT NULL DEFAULT 0,   -- unit price at the time of sale
  product_id     BIGINT        NOT NULL DEFAULT 0,   -- snapshot of the activity's product
  product_name   VARCHAR(255)  NOT NULL DEFAULT '',
  ext            TEXT          NULL,                 -- Message.Ext: opaque JSON, at most 4 KiB
  status         VARCHAR(16)   NOT NULL,             -- CREATED / PAID / CANCELLED / REFUNDED
  expire_time    DATETIME(3)   NOT NULL,
  pay_time       DATETIME(3)   NULL,
  cancel_time    DATETIME(3)   NULL,
  refund_time    DATETIME(3)   NULL,
  restock        VARCHAR(8)    NOT NULL DEFAULT '',  -- of a REFUNDED order: sale / shop / none
  created_at     DATETIME(3)   NULL,
  updated_at     DATETIME(3)   NULL,
  PRIMARY KEY (id),
  UNIQUE KEY `uk_order_no` (order_no),
  UNIQUE KEY `uk_reservation` (reservation_id),
  UNIQUE KEY `uk_user_activity_live` (user_id, activity_id, live_slot), -- UNIQUE(user, activity) when the cap is 1
  KEY `idx_status_expire` (status, expire_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `message_dedup` (
  msg_id         VARCHAR(64)   NOT NULL,
  reservation_id VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  activity_id    VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  user_id        VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- '' when a Fence did not know the buyer
  outcome        VARCHAR(16)   NOT NULL,             -- SUCCESS / FAILED
  order_no       VARCHAR(32)   NOT NULL DEFAULT '',
  reason         VARCHAR(255)  NOT NULL DEFAULT '',
  created_at     DATETIME(3)   NOT NULL,
  PRIMARY KEY (msg_id),
  UNIQUE KEY `uk_dedup_reservation` (reservation_id), -- one outcome per reservation: the consume/release fence
  KEY `idx_dedup_user` (user_id, activity_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `seckill_activity_adjust` (
  adjust_id      VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- the caller's idempotency key (order.AdjustStock)
  activity_id    VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  delta          BIGINT        NOT NULL,             -- + top-up, - withdrawal; moves stock and total_stock together
  operator       VARCHAR(64)   NOT NULL DEFAULT '',
  reason         VARCHAR(255)  NOT NULL DEFAULT '',
  created_at     DATETIME(3)   NOT NULL,
  PRIMARY KEY (adjust_id),
  KEY `idx_adjust_activity` (activity_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `seckill_payment` (
  provider       VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- the payment provider (order.ValidID)
  reference      VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- its payment reference
  order_no       VARCHAR(32)   NOT NULL,
  outcome        VARCHAR(16)   NOT NULL,             -- PAID / CONFLICT / LATE
  created_at     DATETIME(3)   NOT NULL,
  PRIMARY KEY (provider, reference),                 -- the same payment reported twice is one row
  KEY `idx_payment_order` (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `seckill_order_line` (
  order_no       VARCHAR(32)   NOT NULL,             -- the order of an order with lines (its qty is 0)
  line_no        BIGINT        NOT NULL,             -- i: the line's index in Message.Lines
  reservation_id VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- "<order's reservation_id>#<i>", the line's stock reservation
  user_id        VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- the buyer, as in the order
  activity_id    VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- an activity ID or a variant's "a/v" (its stock row)
  qty            BIGINT        NOT NULL,
  price          DECIMAL(12,2) NOT NULL DEFAULT 0,   -- unit price at the time of sale
  status         VARCHAR(16)   NOT NULL DEFAULT '',  -- '' (follows the order) / CANCELLED / REFUNDED
  restock        VARCHAR(8)    NOT NULL DEFAULT '',  -- of a REFUNDED line: sale / shop / none
  updated_at     DATETIME(3)   NULL,
  PRIMARY KEY (order_no, line_no),
  UNIQUE KEY `uk_line_reservation` (reservation_id),
  KEY `idx_line_user_activity` (user_id, activity_id), -- the caps of the lines
  KEY `idx_line_activity` (activity_id, status)        -- the reconciler's conservation
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
