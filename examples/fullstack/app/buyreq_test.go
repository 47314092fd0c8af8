package app

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// buyBodies are bodies of every shape readBuyRequest must answer exactly as
// readJSON does: the plain shape it parses itself and everything it must
// hand to the decoder.
var buyBodies = []string{
	`{"token":"t0123456789","captcha_id":"c0123","captcha":"ABCD","request_id":"0a1b2c"}`,
	` {"token" : "t", "captcha_id":"c","captcha":"A"} `,
	"\t{\n\"token\":\"t\"\r,\"captcha\":\"x y<&>\"}",
	`{"token":"a","token":"b"}`,
	`{"token":"a"}trailing garbage`,
	`{"token":"a"}{"token":"b"}`,
	`{}`,
	`{"TOKEN":"upper"}`,
	`{"Token":"mixed","captcha":"A"}`,
	`{"token":"esc\u0041ped"}`,
	`{"token":"esc\"q"}`,
	`{"token":"ünïcode"}`,
	"{\"token\":\"ctl\x01\"}",
	"{\"token\":\"del\x7f\"}",
	`{"token":5}`,
	`{"token":null,"captcha":"A"}`,
	`{"token":"a","extra":"x"}`,
	`{"token":"a",}`,
	`{"token":"a"`,
	`{"token":"a" "captcha":"b"}`,
	`{"token" "a"}`,
	`["token","a"]`,
	`"token"`,
	`null`,
	``,
	`   `,
	`{"token":"a","captcha_id":["x"]}`,
	`{"request_id":"` + strings.Repeat("r", 60) + `"}`,
	`{"token":"` + strings.Repeat("x", maxBody) + `"}`,
	`{"token":"a"}` + strings.Repeat(" ", maxBody),
	"\xef\xbb\xbf" + `{"token":"bom"}`,
}

// buyRequestOf decodes body with read, the request sent as the generator
// sends it (Content-Length set) or chunked (unknown length).
func buyRequestOf(t *testing.T, read func(*http.Request, *buyRequest) error, body string, chunked bool) (buyRequest, error) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/api/buy/1/sig", strings.NewReader(body))
	if chunked {
		r.ContentLength = -1
		r.Body = io.NopCloser(strings.NewReader(body))
	}
	req := buyRequest{CaptchaID: "kept unless the body sets it"}
	err := read(r, &req)
	return req, err
}

// TestReadBuyRequestMatchesReadJSON: the fast path and the decoder give the
// same request and the same error (or none) for every body.
func TestReadBuyRequestMatchesReadJSON(t *testing.T) {
	viaJSON := func(r *http.Request, v *buyRequest) error { return readJSON(r, v) }
	for _, body := range buyBodies {
		for _, chunked := range []bool{false, true} {
			want, wantErr := buyRequestOf(t, viaJSON, body, chunked)
			got, gotErr := buyRequestOf(t, readBuyRequest, body, chunked)
			if got != want || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Errorf("body %.60q (chunked %v): got %+v, %v; readJSON %+v, %v", body, chunked, got, gotErr, want, wantErr)
			}
		}
	}
}

// TestReadBuyRequestShortBody: a body that ends before its Content-Length
// (the client went away) is decoded from what arrived, then the read error,
// as readJSON's decoder sees it.
func TestReadBuyRequestShortBody(t *testing.T) {
	cut := errors.New("connection reset")
	for _, body := range []string{`{"token":"a","captcha":"b"}`, `{"token":"a","capt`} {
		mk := func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/api/buy/1/sig", nil)
			r.ContentLength = int64(len(body) + 10)
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader(body), errReader{cut}))
			return r
		}
		var want, got buyRequest
		wantErr := readJSON(mk(), &want)
		gotErr := readBuyRequest(mk(), &got)
		if got != want || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("body %q: got %+v, %v; readJSON %+v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

// FuzzReadBuyRequest compares the two readers on arbitrary bodies.
func FuzzReadBuyRequest(f *testing.F) {
	for _, b := range buyBodies {
		f.Add(b)
	}
	viaJSON := func(r *http.Request, v *buyRequest) error { return readJSON(r, v) }
	f.Fuzz(func(t *testing.T, body string) {
		want, wantErr := buyRequestOf(t, viaJSON, body, false)
		got, gotErr := buyRequestOf(t, readBuyRequest, body, false)
		if got != want || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("body %q: got %+v, %v; readJSON %+v, %v", body, got, gotErr, want, wantErr)
		}
	})
}

// BenchmarkReadBuyRequest: the sold-out step's body read, fast path and
// the decoder it replaces.
func BenchmarkReadBuyRequest(b *testing.B) {
	body := `{"token":"` + strings.Repeat("t", 43) + `","captcha_id":"` + strings.Repeat("c", 20) + `","captcha":"ABCD","request_id":"0a1b2c3d4e5f6a7b8c"}`
	for _, bc := range []struct {
		name string
		read func(*http.Request, *buyRequest) error
	}{{"fast", readBuyRequest}, {"readJSON", func(r *http.Request, v *buyRequest) error { return readJSON(r, v) }}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			r := httptest.NewRequest(http.MethodPost, "/api/buy/1/sig", nil)
			sr := strings.NewReader(body)
			r.ContentLength = int64(len(body))
			for b.Loop() {
				sr.Reset(body)
				r.Body = io.NopCloser(sr)
				var req buyRequest
				if err := bc.read(r, &req); err != nil || req.Captcha != "ABCD" {
					b.Fatal(err, req)
				}
			}
		})
	}
}

// cleanPath is path.Clean that keeps a trailing slash, as ServeMux does:
// what isCleanPath is checked against.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

var paths = []string{"/", "//", "/a", "/a/", "/a//b", "/a/./b", "/a/../b", "/.", "/..", "/a/.", "/a/..", "/a/.b", "/a/..b",
	"/a/b.", "/a/...", "/./", "/../", "/api/buy/1/sig", "/static/", "/static//", "/a/b/c/", "/a//", "///", "/.a/", "/%2e/"}

// TestIsCleanPath: isCleanPath answers as comparing with cleanPath does.
func TestIsCleanPath(t *testing.T) {
	for _, p := range paths {
		if got, want := isCleanPath(p), cleanPath(p) == p; got != want {
			t.Errorf("%q: isCleanPath %v, cleanPath says %v", p, got, want)
		}
	}
}

func FuzzIsCleanPath(f *testing.F) {
	for _, p := range paths {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		p = "/" + p
		if got, want := isCleanPath(p), cleanPath(p) == p; got != want {
			t.Errorf("%q: isCleanPath %v, cleanPath says %v", p, got, want)
		}
	})
}

// twoLookupGuard is guard as it was before it ran the mux once: it asked
// the mux for the pattern first, then served the request through it.
func twoLookupGuard(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || !isCleanPath(p) {
			writeErr(w, http.StatusBadRequest, "bad_request", "malformed path")
			return
		}
		if r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead && !isJSON(r.Header.Get("Content-Type")) {
			writeErr(w, http.StatusUnsupportedMediaType, "bad_request", "the body must be application/json")
			return
		}
		h, pattern := mux.Handler(r)
		if pattern == "" {
			rec := &headerOnly{h: http.Header{}}
			h.ServeHTTP(rec, r)
			switch {
			case rec.code == http.StatusMethodNotAllowed:
				if allow := rec.h.Get("Allow"); allow != "" {
					w.Header().Set("Allow", allow)
				}
				writeErr(w, http.StatusMethodNotAllowed, "bad_request", "method not allowed")
			case rec.code >= 300 && rec.code < 400 && !strings.HasPrefix(r.URL.Path, "/api/"):
				http.Redirect(w, r, rec.h.Get("Location"), rec.code)
			default:
				writeErr(w, http.StatusNotFound, "not_found", "no such path")
			}
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// TestGuardMatchesTwoLookupGuard: guard answers every request as the
// two-lookup guard did (code, headers, body), the routes on the real
// ResponseWriter with their path values.
func TestGuardMatchesTwoLookupGuard(t *testing.T) {
	patterns := []string{"GET /{$}", "GET /static/", "GET /healthz", "POST /api/login", "GET /api/activity",
		"POST /api/buy/{activity}/{sig}", "POST /api/buy/{rest...}", "GET /api/result/{reservation}",
		"POST /api/events/{reservation}/ticket", "GET /api/events/{reservation}", "GET /tree/"}
	build := func(mark bool) *http.ServeMux {
		mux := http.NewServeMux()
		for _, p := range patterns {
			var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, flusher := w.(http.Flusher) // the real writer, not a wrapper
				w.Header().Set("X-Route", r.Pattern)
				w.WriteHeader(http.StatusTeapot)
				_, _ = io.WriteString(w, p+" activity="+r.PathValue("activity")+" sig="+r.PathValue("sig")+
					" rest="+r.PathValue("rest")+" reservation="+r.PathValue("reservation")+" flusher="+strconv.FormatBool(flusher))
			})
			if mark {
				h = routed(h)
			}
			mux.Handle(p, h)
		}
		return mux
	}
	oldH, newH := twoLookupGuard(build(false)), guard(build(true))
	methods := []string{"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "CONNECT"}
	paths := []string{"/", "/static", "/static/", "/static/app.js", "/healthz", "/healthz/", "/api/login", "/api/activity",
		"/api/buy", "/api/buy/", "/api/buy/1", "/api/buy/1/sig", "/api/buy/1/sig/more", "/api/buy/1/s%2Fg", "/api/result/r1",
		"/api/result/", "/api/events/r1", "/api/events/r1/ticket", "/tree", "/tree/x", "/nope", "/api/nope",
		"/a/../b", "//x", "/api/buy/%2e%2e/x", "/x?y=1", "/tree?q=1"}
	for _, m := range methods {
		for _, p := range paths {
			for _, body := range []string{"", `{"a":1}`} {
				run := func(h http.Handler) *httptest.ResponseRecorder {
					r := httptest.NewRequest(m, "http://example.com"+p, strings.NewReader(body))
					if body != "" {
						r.Header.Set("Content-Type", "application/json")
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					return rec
				}
				want, got := run(oldH), run(newH)
				if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
					t.Errorf("%s %s body %q:\n got  %d %v %q\n want %d %v %q", m, p, body,
						got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
				}
			}
		}
	}
}

// TestClientReservationIDsDoNotCollide: the attempt ID is one to one in
// (user, request ID), and a buyer's prefix starts none of another buyer's
// IDs, although user IDs and request IDs may both contain "-".
func TestClientReservationIDsDoNotCollide(t *testing.T) {
	users := []string{"1", "1-2", "12", "1-", "1-2-3", "a.b", "a", "1.1", "11", "u1", "2-x"}
	rids := []string{"x", "2-x", "-x", "x-", "2", "1-2", "3-x", "_"}
	seen := map[string][2]string{}
	for _, u := range users {
		for _, r := range rids {
			id := clientReservationID(u, r)
			if prev, ok := seen[id]; ok {
				t.Errorf("%q: user %q request %q and user %q request %q", id, prev[0], prev[1], u, r)
			}
			seen[id] = [2]string{u, r}
			if !strings.HasPrefix(id, clientReservationPrefix(u)) {
				t.Errorf("%q does not start with its user's prefix", id)
			}
			for _, other := range users {
				if other != u && strings.HasPrefix(id, clientReservationPrefix(other)) {
					t.Errorf("user %q's prefix %q starts user %q's ID %q", other, clientReservationPrefix(other), u, id)
				}
			}
		}
	}
}
