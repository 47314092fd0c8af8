package limiter_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/seckillkit/seckill/limiter"
)

// Three classes share one node's intake of 10 tokens: "suspect" may take
// only while more than 6 are left, "normal" while more than 3, "verified"
// down to the last. Under a flood from every class, suspect is shed first,
// then normal; verified gets the rest.
func ExampleNewPriority() {
	intake, _ := limiter.NewTokenBucket(limiter.Every(time.Second), 10) // 1/s, bursts of 10
	p, err := limiter.NewPriority(intake,
		limiter.PriorityClass{Name: "verified"},
		limiter.PriorityClass{Name: "normal", Floor: 3},
		limiter.PriorityClass{Name: "suspect", Floor: 6})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	admitted := map[string]int{}
	for range 10 {
		for _, class := range []string{"suspect", "normal", "verified"} {
			if r, _ := p.AllowN(ctx, class, 1); r.Allowed {
				admitted[class]++
			}
		}
	}
	fmt.Println(admitted["suspect"], admitted["normal"], admitted["verified"])
	// Output:
	// 2 3 5
}

// In the middleware the class is a function of the request: here a risk
// score set by earlier middleware, mapped to a class.
func ExampleNewPriority_middleware() {
	intake, _ := limiter.NewTokenBucket(limiter.Every(time.Second), 10)
	p, _ := limiter.NewPriority(intake,
		limiter.PriorityClass{Name: "verified"}, limiter.PriorityClass{Name: "suspect", Floor: 8})
	classOf := func(r *http.Request) (string, error) {
		if score, err := strconv.Atoi(r.Header.Get("X-Risk-Score")); err == nil && score < 50 {
			return "verified", nil
		}
		return "suspect", nil // no score, or a high one
	}
	mw, _ := limiter.NewMiddleware([]limiter.Rule{{Name: "priority", Limiter: p, Key: classOf}})
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, score := range []string{"90", "90", "90", "10"} {
		req := httptest.NewRequest(http.MethodPost, "/buy", nil)
		req.Header.Set("X-Risk-Score", score)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Println(score, w.Code)
	}
	// Output:
	// 90 200
	// 90 200
	// 90 429
	// 10 200
}

// A hot item gets a lower rate than the others, a VIP user a higher one.
func ExampleWithException() {
	perKey, _ := limiter.NewKeyed(1, 2, // 1/s, bursts of 2 per key
		limiter.WithException("item:hot", limiter.Every(time.Minute), 1),
		limiter.WithException("user:vip", 10, 5))
	for _, key := range []string{"user:7", "item:hot", "user:vip"} {
		n := 0
		for range 10 {
			if perKey.Allow(key) {
				n++
			}
		}
		fmt.Println(key, n)
	}
	// Output:
	// user:7 2
	// item:hot 1
	// user:vip 5
}
