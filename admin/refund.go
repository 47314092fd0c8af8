package admin

import (
	"net/http"
	"slices"
)

// restocks are the restock choices of a refund.
var restocks = []string{"sale", "shop", "none"}

// refund refunds one order of the activity, audited like every mutation
// (target "order:<order number>"): the restock choice is required, never
// defaulted, since it decides whether the units go back on sale.
func (h *Handler) refund(w http.ResponseWriter, r *http.Request, c *call) {
	var req RefundParams
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	if !slices.Contains(restocks, req.Restock) {
		writeError(w, invalidArg("restock: required, sale, shop or none"))
		return
	}
	req.Activity, req.OrderNo = c.vars[0], c.vars[1]
	h.mutate(w, r, c, mutation{
		action: "refund", activity: req.Activity, target: "order:" + req.OrderNo, params: req,
		run: func(ctx ctxT) (any, any, any, error) {
			ch, err := h.b.Refund(ctx, req)
			if err != nil {
				return nil, nil, nil, err
			}
			return ch.Before, ch.After, ch, nil
		},
	})
}
