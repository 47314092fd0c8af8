-- seckill DB fallback tables for MySQL 8 / MariaDB 10.6+ (InnoDB, utf8mb4),
-- with the default table prefix "seckill_fallback_". Equivalent to
-- Store.AutoMigrate; kept for DBAs who manage DDL by hand. Times are Unix
-- milliseconds of the Store's clock (0 = none).

CREATE TABLE IF NOT EXISTS seckill_fallback_pool (
  activity_id    VARCHAR(129) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- one pool per activity (1..64 of [A-Za-z0-9._@+-]) or per size: '<sale>/<size>' 
  quota          BIGINT         NOT NULL,            -- units the pool answers for: remaining + held
  remaining      BIGINT         NOT NULL,            -- guarded: UPDATE … SET remaining = remaining - n WHERE … AND remaining >= n
  drained        BIGINT         NOT NULL DEFAULT 0,  -- units taken out by Drain (opened quota = quota + drained)
  per_user_limit BIGINT         NOT NULL,
  start_ms       BIGINT         NOT NULL DEFAULT 0,  -- window start (0 = open)
  end_ms         BIGINT         NOT NULL DEFAULT 0,  -- window end, exclusive (0 = no end)
  updated_ms     BIGINT         NOT NULL,
  sizes          BIGINT         NOT NULL DEFAULT 0,  -- a sale in sizes' own row: its number of sizes (it holds no units); else 0
  PRIMARY KEY (activity_id),
  CONSTRAINT chk_seckill_fallback_pool_quota CHECK (quota >= remaining),
  CONSTRAINT chk_seckill_fallback_pool_remaining CHECK (remaining >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS seckill_fallback_reservation (
  request_id     VARBINARY(128) NOT NULL,            -- the idempotency key, compared byte for byte
  activity_id    VARCHAR(129) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- compared byte for byte; a size's is '<sale>/<size>' 
  user_id        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, -- '' for a tombstone
  qty            BIGINT         NOT NULL,            -- 0 for a tombstone
  state          CHAR(1)        NOT NULL,            -- R held, X released (a tombstone when qty = 0)
  created_ms     BIGINT         NOT NULL,
  released_ms    BIGINT         NOT NULL DEFAULT 0,
  PRIMARY KEY (request_id),
  KEY idx_seckill_fallback_reservation_user (activity_id, user_id),         -- the per-user cap
  KEY idx_seckill_fallback_reservation_held (activity_id, state, request_id) -- Reservations, Stats
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
