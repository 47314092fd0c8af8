package checkouttest_test

import (
	"testing"

	"github.com/seckillkit/seckill/checkout/checkouttest"
)

// TestEmbedded runs the kit against the reference composition: every
// scenario passes.
func TestEmbedded(t *testing.T) {
	checkouttest.Run(t, checkouttest.Embedded)
}
