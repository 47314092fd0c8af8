package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
)

// refundCmd: seckillctl refund ACTIVITY ORDER --restock sale|shop|none.
// The restock choice is required: it decides whether the units go back
// on sale, and a default would decide it for the operator.
func (c *cli) refundCmd() *cobra.Command {
	var restock string
	cmd := c.actionCmd("refund ACTIVITY ORDER --restock sale|shop|none", "Refund a paid order; its units go back on sale, to the shop's inventory, or stay sold", 2,
		func(a []string) (string, any, error) {
			switch restock {
			case "sale", "shop", "none":
			default:
				return "", nil, fmt.Errorf("%w: --restock %q: want sale, shop or none", errUsage, restock)
			}
			return "activities/" + url.PathEscape(a[0]) + "/orders/" + url.PathEscape(a[1]) + "/refund", map[string]string{"restock": restock}, nil
		})
	cmd.Flags().StringVar(&restock, "restock", "", "where the units go: sale (back on sale), shop (the shop's own inventory) or none (they stay sold); required")
	_ = cmd.MarkFlagRequired("restock")
	return cmd
}
