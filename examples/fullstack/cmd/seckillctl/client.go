package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/seckillkit/seckill/admin"
)

// maxAnswer caps the answer read from the server.
const maxAnswer = 32 << 20

// client calls the admin API.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
	key   string // Idempotency-Key of this invocation's action, if any
}

// apiError is the server's error answer: the body
// {"status":"<code>","message":"<text>"}, decoded as admin.ErrorAnswer (the
// one error type of the library's HTTP APIs; members added later are
// ignored, an answer without a status is not the admin API's), and the
// HTTP status it came with.
type apiError struct {
	HTTPStatus int
	Status     string // the machine code, e.g. "conflict"
	Message    string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Status, e.Message, e.HTTPStatus)
}

// errUsage marks a command-line mistake (exit status 2).
var errUsage = errors.New("usage")

func newClient(addr, token string, hc *http.Client) (*client, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: no token: set %s (or pass --token-file FILE, - for stdin)", errUsage, envToken)
	}
	u, err := baseURL(addr)
	if err != nil {
		return nil, err
	}
	// No redirect is followed: net/http would send the Authorization
	// header along to the same host, even from https down to http.
	nr := *hc
	nr.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client{base: u, token: token, http: &nr}, nil
}

// defaultPath is the admin API's path on the service's admin listener.
const defaultPath = "/admin/"

// baseURL turns an --addr into the API's base URL. It takes the URL the
// service logs ("admin API listening url=…") as it is, the same without
// the /admin/ path, or a bare host:port (http). Plain http goes only to a
// loopback address: elsewhere the token would cross the network in clear.
func baseURL(addr string) (*url.URL, error) {
	s := addr
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: --addr %q: want the URL the service logs, e.g. http://127.0.0.1:9090/admin/ (or host:port)", errUsage, addr)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return nil, fmt.Errorf("%w: --addr %q: plain http only to a loopback address (127.0.0.0/8, ::1, localhost): the token would cross the network in clear; use https://", errUsage, addr)
	}
	switch {
	case u.Path == "" || u.Path == "/":
		u.Path = defaultPath
	case !strings.HasSuffix(u.Path, "/"):
		u.Path += "/"
	}
	u.RawPath = ""
	return u, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// get calls GET path?query.
func (c *client) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := c.base.JoinPath(path)
	u.RawQuery = q.Encode()
	return c.do(ctx, http.MethodGet, u, nil)
}

// post calls POST path with body as JSON.
func (c *client) post(ctx context.Context, path string, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, http.MethodPost, c.base.JoinPath(path), b)
}

func (c *client) do(ctx context.Context, method string, u *url.URL, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		if c.key != "" {
			req.Header.Set("Idempotency-Key", c.key)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, fmt.Errorf("%s %s: the server answered a redirect (HTTP %d to %q); seckillctl follows none, the token would go along: pass the final URL as --addr",
			method, u.Path, resp.StatusCode, resp.Header.Get("Location"))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", method, u.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e admin.ErrorAnswer
		if json.Unmarshal(data, &e) != nil || e.Status == "" {
			return nil, &apiError{HTTPStatus: resp.StatusCode, Status: "http_" + strconv.Itoa(resp.StatusCode), Message: "not an admin API answer"}
		}
		return nil, &apiError{HTTPStatus: resp.StatusCode, Status: e.Status, Message: e.Message}
	}
	return data, nil
}
