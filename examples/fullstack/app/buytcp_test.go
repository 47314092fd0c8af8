//go:build unix

package app_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// BenchmarkBuySoldOutTCP measures, in one run, the answer most buys of a
// sale get (signed in, valid path and body, refused by the sold-out flag)
// over loopback TCP from the service's own http.Server, and the same
// requests answered by the load generator's bare net/http server
// (load.BareHandler, the baseline of the buy-phase target). Both get the
// same raw keep-alive client, so service ns/op ÷ bare ns/op is the cost of
// the chain on top of net/http. cpu-ns/op is the process's CPU per request,
// client included (the same for both), and steadier than ns/op on a shared
// machine.
func BenchmarkBuySoldOutTCP(b *testing.B) {
	const buyers = 256
	_, base, _, _, _ := soldOutSale(b, buyers+2)
	reqs := make([][]byte, buyers)
	for i := range reqs {
		bearer, path, body := benchBuyer(b, base, "user"+strconv.Itoa(i+3), "loser"+strconv.Itoa(i+3))
		reqs[i] = rawBuy(path, bearer, body)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bare := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: load.BareHandler()}
	go func() { _ = bare.Serve(ln) }()
	defer bare.Close()

	for _, s := range []struct{ name, addr string }{
		{"bare", ln.Addr().String()},
		{"service", base[len("http://"):]},
	} {
		b.Run(s.name, func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(4)
			cpu0 := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				c, err := net.Dial("tcp", s.addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				rd := bufio.NewReader(c)
				req := reqs[int(next.Add(1))%buyers]
				for pb.Next() {
					if _, err := c.Write(req); err != nil {
						b.Error(err)
						return
					}
					// 409 sold out; once a second one buy goes on to ask
					// the DB pool (the app's poolSoldOut) and may be
					// refused further down the chain.
					code, err := readAnswer(rd)
					if err != nil || code < 400 || code >= 500 {
						b.Errorf("answer %d, %v", code, err)
						return
					}
				}
			})
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's user + system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// rawBuy is the buy request as the wire carries it.
func rawBuy(path, bearer string, body []byte) []byte {
	var w bytes.Buffer
	fmt.Fprintf(&w, "POST %s HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, bearer, len(body))
	w.Write(body)
	return w.Bytes()
}

// readAnswer reads one HTTP/1.1 answer with a Content-Length and returns
// its status code.
func readAnswer(rd *bufio.Reader) (int, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 {
		return 0, fmt.Errorf("status line %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, err
	}
	n := -1
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			n, err = strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return 0, err
			}
		}
	}
	if n < 0 {
		return 0, fmt.Errorf("answer %d without Content-Length", code)
	}
	_, err = rd.Discard(n)
	return code, err
}
