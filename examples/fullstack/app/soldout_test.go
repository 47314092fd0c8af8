package app_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// readCounter is a request body that counts the reads made of it.
type readCounter struct {
	r     io.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }
func (c *readCounter) Close() error               { return nil }

// TestSoldOutRefusalReadsNoBody: once the sale is sold out, a buyer none of
// whose attempts won is refused 409 without the body being read (before,
// every refusal parsed it, and reading it to the end also started
// net/http's background read of the connection). A winner's retry is still
// answered with its reservation, and a winner's new attempt is refused.
func TestSoldOutRefusalReadsNoBody(t *testing.T) {
	a, base, winBearer, winPath, winBody := soldOutSale(t, 10)
	resv := app.ClientReservationID("1", "winner1")
	bearer, path, body := benchBuyer(t, base, "user3", "lost3")
	rc := &readCounter{r: bytes.NewReader(body)}
	req := httptest.NewRequest("POST", path, nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Body, req.ContentLength = rc, int64(len(body))
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, req)
	assert.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	assert.JSONEq(t, `{"status":"sold_out","message":"sold out"}`, w.Body.String())
	assert.Zero(t, rc.reads, "the body of a buyer who won nothing was read")

	// The winner's retry (same attempt) gets its reservation back: still
	// queued (202), or already an order (200 created) when the consumer was
	// quicker (CI, a loaded box).
	code, m := benchCall(t, base, "POST", winPath, winBearer, rawJSON(winBody))
	if code == http.StatusOK {
		assert.Equal(t, "created", m["status"], m)
	} else {
		assert.Equal(t, http.StatusAccepted, code, m)
	}
	assert.Equal(t, resv, m["reservation"])
	// A new attempt of the winner is sold out.
	_, _, newBody := benchBuyer(t, base, "user1", "winner1-again")
	code, m = benchCall(t, base, "POST", winPath, winBearer, rawJSON(newBody))
	assert.Equal(t, http.StatusConflict, code, m)
	assert.Equal(t, "sold_out", m["status"])
}
