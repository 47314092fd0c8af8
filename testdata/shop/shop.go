// Package shop is an application that integrates seckill's order and
// outbox packages the way an existing shop service would: under its own
// table names, with its own string (UUID) user IDs, its own extension
// payload on every order message, and its own order rows written in the
// consumer's transaction. It imports only the public packages of
// github.com/seckillkit/seckill; its test runs it on SQLite, MariaDB and
// PostgreSQL with Kafka in process and counts the invariants in SQL.
package shop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/outbox"
)

// The shop's names for the tables of order and outbox, and its own table.
var (
	OrderTables = order.Tables{Activity: "shop_sale", Order: "shop_sale_order", Dedup: "shop_sale_dedup"}
	OutboxTable = "shop_outbox"
)

// ShopOrdersTable is the shop's own order table.
const ShopOrdersTable = "shop_orders"

// Payload is what the shop carries on each order message (order.Message.Ext).
type Payload struct {
	SKU       string `json:"sku"`
	Channel   string `json:"channel"`
	PricePaid int64  `json:"price_paid"` // cents, after the shop's coupon
	Coupon    string `json:"coupon,omitempty"`
}

// ShopOrder is a row of the shop's own order table: one per seckill order,
// written in the same transaction (see [WriteShopOrders]).
type ShopOrder struct {
	OrderNo       string `gorm:"primaryKey;size:32"`
	ReservationID string `gorm:"size:64;not null;uniqueIndex:uk_shop_orders_resv"`
	UserID        string `gorm:"size:64;not null;index:idx_shop_orders_user"`
	SaleID        string `gorm:"size:64;not null"`
	SKU           string `gorm:"size:64;not null"`
	Channel       string `gorm:"size:16;not null"`
	PricePaid     int64  `gorm:"not null"`
	CreatedAt     time.Time
}

// TableName implements gorm's Tabler.
func (ShopOrder) TableName() string { return ShopOrdersTable }

// Migrate creates the order tables under the shop's names, its outbox
// table and its own order table.
func Migrate(ctx context.Context, db *gorm.DB) error {
	if err := order.AutoMigrate(ctx, db, order.WithTables(OrderTables)); err != nil {
		return err
	}
	if err := outbox.AutoMigrate(ctx, db, outbox.WithTable(OutboxTable)); err != nil {
		return err
	}
	return db.WithContext(ctx).AutoMigrate(&ShopOrder{})
}

// NewMessage is the order message of one reservation: the buyer's UUID,
// the sale's ID and the shop's payload.
func NewMessage(reservationID, saleID, userID string, p Payload) (order.Message, error) {
	ext, err := json.Marshal(p)
	if err != nil {
		return order.Message{}, err
	}
	m := order.Message{Version: order.MessageVersion, MsgID: outbox.NewMsgID(), ReservationID: reservationID, ActivityID: saleID, UserID: userID,
		Qty: 1, Price: p.PricePaid, CreatedAt: time.Now(), Ext: ext}
	return m, m.Validate()
}

// ErrBadPayload is returned by [WriteShopOrders] for an order whose
// payload the shop cannot read: permanent, the message is dead-lettered.
var ErrBadPayload = errors.New("shop: bad order payload")

// WriteShopOrders is the shop's [order.TxHook]: one shop_orders row per
// new order of the batch, in the consumer's transaction, so the shop's
// rows commit or roll back with seckill's.
func WriteShopOrders(ctx context.Context, tx *gorm.DB, orders []order.Order) error {
	rows := make([]ShopOrder, len(orders))
	for i, o := range orders {
		var p Payload
		if err := json.Unmarshal(o.Ext, &p); err != nil || p.SKU == "" {
			return order.Permanent(fmt.Errorf("%w: order %s: %v", ErrBadPayload, o.OrderNo, err))
		}
		rows[i] = ShopOrder{OrderNo: o.OrderNo, ReservationID: o.ReservationID, UserID: o.UserID, SaleID: o.ActivityID,
			SKU: p.SKU, Channel: p.Channel, PricePaid: p.PricePaid, CreatedAt: o.CreatedAt}
	}
	return tx.WithContext(ctx).Create(&rows).Error
}

// OutboxFallback is the shop's fallback (its Store method is the
// [handoff.Fallback]): a message Kafka did not take is stored in the
// shop's outbox table, in its own transaction, for the relay to publish — with the message's ID as the outbox ID and the
// user ID as the Kafka key, as the direct path sends it.
type OutboxFallback struct {
	DB     *gorm.DB
	Writer *outbox.Writer
	Topic  string
}

// Store is the shop's [handoff.Fallback].
func (f OutboxFallback) Store(ctx context.Context, m order.Message) error {
	body, err := m.Encode()
	if err != nil {
		return err
	}
	return f.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return f.Writer.Write(ctx, tx, outbox.Message{MsgID: m.MsgID, Topic: f.Topic, Key: m.Key(), ReservationID: m.ReservationID, Payload: body})
	})
}
