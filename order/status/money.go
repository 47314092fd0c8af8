package status

// Payment is one payment a provider reports for an order: the provider's
// name ([order.ValidID], "stripe") and its reference for the payment (1 to
// 128 printable ASCII bytes, no space: "pi_3N…"). The pair is the
// payment's identity: [Canceller.PayRef] records it once.
type Payment struct {
	Provider  string
	Reference string
}

// Restock is where the units of a refunded order go ([Canceller.Refund]),
// the Restock column of the refunded order.
type Restock string

// The restock choices of a refund.
const (
	// RestockNone keeps the units sold (a refund without a return).
	RestockNone Restock = "none"
	// RestockSale returns the units to the sale, like a cancellation: the
	// DB stock in the refund's transaction, then the Redis reservation
	// through the releaser; counted back into the remaining stock.
	RestockSale Restock = "sale"
	// RestockShop returns the units to the shop's own inventory: the
	// refund hook ([WithRefundHook]) runs in the refund's transaction; for
	// the sale they stay sold.
	RestockShop Restock = "shop"
)
