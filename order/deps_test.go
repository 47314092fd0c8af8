package order

import (
	"os/exec"
	"strings"
	"testing"
)

// The package depends on no Kafka client: everything sarama is in the
// orderkafka sub-package. go list -deps lists the non-test imports only.
func TestNoKafkaClientDependency(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		if d == "github.com/IBM/sarama" || strings.HasPrefix(d, "github.com/IBM/sarama/") ||
			strings.HasPrefix(d, "github.com/seckillkit/seckill/order/") && !strings.HasPrefix(d, "github.com/seckillkit/seckill/order/internal/") {
			t.Errorf("order depends on %s", d)
		}
	}
}
