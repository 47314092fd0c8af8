-- seckill order tables for PostgreSQL 11+. Equivalent to order.AutoMigrate on
-- PostgreSQL; order.Schema("postgres", order.WithTables(...)) gives this DDL
-- for other table names (index and constraint names are then derived from
-- them: PostgreSQL names indexes per schema).
--
-- UNIQUE treats NULLs as distinct (as MySQL does; do not add NULLS NOT
-- DISTINCT), so live_slot = NULL never collides: see seckill_order below.

CREATE TABLE IF NOT EXISTS "seckill_activity" (
  "id"             VARCHAR(64)    NOT NULL,            -- the activity ID (order.ValidID), as in stock and the messages
  "name"           VARCHAR(128)   NOT NULL DEFAULT '',
  "product_id"     BIGINT         NOT NULL DEFAULT 0,
  "product_name"   VARCHAR(255)   NOT NULL DEFAULT '',
  "original_price" DECIMAL(12,2)  NOT NULL DEFAULT 0,
  "activity_price" DECIMAL(12,2)  NOT NULL DEFAULT 0,
  "total_stock"    BIGINT         NOT NULL DEFAULT 0,
  "stock"          BIGINT         NOT NULL DEFAULT 0,  -- guarded: UPDATE … SET stock = stock - n WHERE id = ? AND stock >= n
  "user_limit"     BIGINT         NOT NULL DEFAULT 1,  -- per-user cap; 1 turns on live_slot below
  "version"        BIGINT         NOT NULL DEFAULT 0,
  "status"         SMALLINT       NOT NULL DEFAULT 1,
  "start_time"     TIMESTAMPTZ    NOT NULL,
  "end_time"       TIMESTAMPTZ    NOT NULL,
  "created_at"     TIMESTAMPTZ    NULL,
  "updated_at"     TIMESTAMPTZ    NULL,
  PRIMARY KEY ("id"),
  CONSTRAINT "chk_stock_nonneg" CHECK ("stock" >= 0)
);

CREATE TABLE IF NOT EXISTS "seckill_order" (
  "id"             BIGINT         NOT NULL,            -- snowflake (order.IDGenerator)
  "order_no"       VARCHAR(32)    NOT NULL,
  "reservation_id" VARCHAR(128)   NOT NULL,            -- one order per Redis reservation (order.ValidReservationID)
  "user_id"        VARCHAR(64)    NOT NULL,            -- order.ValidID
  "activity_id"    VARCHAR(64)    NOT NULL,
  "live_slot"      SMALLINT       NULL,                -- 1 while live and user_limit = 1, else NULL
  "qty"            BIGINT         NOT NULL,
  "price"          DECIMAL(12,2)  NOT NULL DEFAULT 0,  -- unit price at the time of sale
  "product_id"     BIGINT         NOT NULL DEFAULT 0,  -- snapshot of the activity's product
  "product_name"   VARCHAR(255)   NOT NULL DEFAULT '',
  "ext"            TEXT           NULL,                -- Message.Ext: opaque JSON, at most 4 KiB
  "status"         VARCHAR(16)    NOT NULL,            -- CREATED / PAID / CANCELLED / REFUNDED
  "expire_time"    TIMESTAMPTZ    NOT NULL,
  "pay_time"       TIMESTAMPTZ    NULL,
  "cancel_time"    TIMESTAMPTZ    NULL,
  "refund_time"    TIMESTAMPTZ    NULL,
  "restock"        VARCHAR(8)     NOT NULL DEFAULT '', -- of a REFUNDED order: sale / shop / none
  "created_at"     TIMESTAMPTZ    NULL,
  "updated_at"     TIMESTAMPTZ    NULL,
  PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX IF NOT EXISTS "uk_order_no" ON "seckill_order" ("order_no");
CREATE UNIQUE INDEX IF NOT EXISTS "uk_reservation" ON "seckill_order" ("reservation_id");
CREATE UNIQUE INDEX IF NOT EXISTS "uk_user_activity_live" ON "seckill_order" ("user_id", "activity_id", "live_slot"); -- UNIQUE(user, activity) when the cap is 1
CREATE INDEX IF NOT EXISTS "idx_status_expire" ON "seckill_order" ("status", "expire_time");

CREATE TABLE IF NOT EXISTS "message_dedup" (
  "msg_id"         VARCHAR(64)    NOT NULL,
  "reservation_id" VARCHAR(128)   NOT NULL,
  "activity_id"    VARCHAR(64)    NOT NULL,
  "user_id"        VARCHAR(64)    NOT NULL,            -- '' when a Fence did not know the buyer
  "outcome"        VARCHAR(16)    NOT NULL,            -- SUCCESS / FAILED
  "order_no"       VARCHAR(32)    NOT NULL DEFAULT '',
  "reason"         VARCHAR(255)   NOT NULL DEFAULT '',
  "created_at"     TIMESTAMPTZ    NOT NULL,
  PRIMARY KEY ("msg_id")
);
CREATE UNIQUE INDEX IF NOT EXISTS "uk_dedup_reservation" ON "message_dedup" ("reservation_id"); -- one outcome per reservation: the consume/release fence
CREATE INDEX IF NOT EXISTS "idx_dedup_user" ON "message_dedup" ("user_id", "activity_id");

CREATE TABLE IF NOT EXISTS "seckill_activity_adjust" (
  "adjust_id"      VARCHAR(128)   NOT NULL,            -- the caller's idempotency key (order.AdjustStock)
  "activity_id"    VARCHAR(64)    NOT NULL,
  "delta"          BIGINT         NOT NULL,            -- + top-up, - withdrawal; moves stock and total_stock together
  "operator"       VARCHAR(64)    NOT NULL DEFAULT '',
  "reason"         VARCHAR(255)   NOT NULL DEFAULT '',
  "created_at"     TIMESTAMPTZ    NOT NULL,
  PRIMARY KEY ("adjust_id")
);
CREATE INDEX IF NOT EXISTS "idx_adjust_activity" ON "seckill_activity_adjust" ("activity_id", "created_at");

CREATE TABLE IF NOT EXISTS "seckill_payment" (
  "provider"       VARCHAR(64)    NOT NULL,            -- the payment provider (order.ValidID)
  "reference"      VARCHAR(128)   NOT NULL,            -- its payment reference
  "order_no"       VARCHAR(32)    NOT NULL,
  "outcome"        VARCHAR(16)    NOT NULL,            -- PAID / CONFLICT / LATE
  "created_at"     TIMESTAMPTZ    NOT NULL,
  PRIMARY KEY ("provider", "reference")               -- the same payment reported twice is one row
);
CREATE INDEX IF NOT EXISTS "idx_payment_order" ON "seckill_payment" ("order_no");

CREATE TABLE IF NOT EXISTS "seckill_order_line" (
  "order_no"       VARCHAR(32)    NOT NULL,            -- the order of an order with lines (its qty is 0)
  "line_no"        BIGINT         NOT NULL,            -- i: the line's index in Message.Lines
  "reservation_id" VARCHAR(128)   NOT NULL,            -- "<order's reservation_id>#<i>", the line's stock reservation
  "user_id"        VARCHAR(64)    NOT NULL,            -- the buyer, as in the order
  "activity_id"    VARCHAR(64)    NOT NULL,            -- an activity ID or a variant's "a/v" (its stock row)
  "qty"            BIGINT         NOT NULL,
  "price"          DECIMAL(12,2)  NOT NULL DEFAULT 0,  -- unit price at the time of sale
  "status"         VARCHAR(16)    NOT NULL DEFAULT '', -- '' (follows the order) / CANCELLED / REFUNDED
  "restock"        VARCHAR(8)     NOT NULL DEFAULT '', -- of a REFUNDED line: sale / shop / none
  "updated_at"     TIMESTAMPTZ    NULL,
  PRIMARY KEY ("order_no", "line_no")
);
CREATE UNIQUE INDEX IF NOT EXISTS "uk_line_reservation" ON "seckill_order_line" ("reservation_id");
CREATE INDEX IF NOT EXISTS "idx_line_user_activity" ON "seckill_order_line" ("user_id", "activity_id");
CREATE INDEX IF NOT EXISTS "idx_line_activity" ON "seckill_order_line" ("activity_id", "status");
