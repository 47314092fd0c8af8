package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/admin/admintest"
	"github.com/seckillkit/seckill/internal/testenv"
)

const testToken = "s3cret-admin-token-for-tests-0123456789"

// testLabelKey keys the operator labels (a server secret in the service).
var testLabelKey = []byte("label-key-for-tests-0123456789abcdef")

// auditTable is the audit table New writes when WithTable names none.
const auditTable = "seckill_admin_audit"

// fixture is a handler over an admintest.Memory backend with its audit log
// on a real database.
type fixture struct {
	t     *testing.T
	db    *gorm.DB
	mem   *admintest.Memory
	h     *admin.Handler
	clock *testenv.Clock
	table string
}

// forEachDB runs f on every database available: SQLite always, MariaDB and
// PostgreSQL when their DSNs are set.
func forEachDB(t *testing.T, f func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	dbs := testenv.AllDB(t)
	kinds := make([]string, 0, len(dbs))
	for k := range dbs {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		db := dbs[testenv.DBKind(k)]
		t.Run(k, func(t *testing.T) { f(t, db) })
	}
}

func newFixture(t *testing.T, db *gorm.DB, opts ...admin.Option) *fixture {
	t.Helper()
	if db == nil {
		db = testenv.SQLite(t)
	}
	clock := testenv.NewEpochClock(0)
	mem := admintest.NewMemory()
	mem.Clock = clock
	auth, err := admin.BearerToken(testToken, testLabelKey)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, db: db, mem: mem, clock: clock, table: auditTable}
	opts = append([]admin.Option{admin.WithPrefix("/admin/"), admin.WithClock(clock)}, opts...)
	f.h, err = admin.New(mem, db, auth, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.h.AutoMigrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if bad := mem.BadCalls(); len(bad) > 0 {
			t.Errorf("the backend got arguments the handler should have refused: %q", bad)
		}
	})
	return f
}

// req is one request to the handler.
type req struct {
	method, path, body string
	contentType        string // default application/json on POST
	token              string // default testToken; "-" for none
	key                string // Idempotency-Key
}

type resp struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(r req) resp {
	f.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.method == http.MethodPost {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		if ct != "-" {
			hr.Header.Set("Content-Type", ct)
		}
	}
	switch r.token {
	case "":
		hr.Header.Set("Authorization", "Bearer "+testToken)
	case "-":
	default:
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, hr)
	return resp{status: w.Code, header: w.Header(), body: w.Body.String()}
}

func (f *fixture) post(path, body, key string) resp {
	f.t.Helper()
	return f.do(req{method: http.MethodPost, path: path, body: body, key: key})
}

func (f *fixture) get(path string) resp {
	f.t.Helper()
	return f.do(req{method: http.MethodGet, path: path})
}

// mustOK fails unless r is 200 and decodes its body into v (if not nil).
func (f *fixture) mustOK(r resp, v any) {
	f.t.Helper()
	if r.status != http.StatusOK {
		f.t.Fatalf("status %d, body %s", r.status, r.body)
	}
	if r.header.Get("Content-Type") != "application/json" {
		f.t.Fatalf("Content-Type %q", r.header.Get("Content-Type"))
	}
	if v != nil {
		if err := json.Unmarshal([]byte(r.body), v); err != nil {
			f.t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// mustError fails unless r is status with the JSON error shape
// {"status":code,"message":…}.
func (f *fixture) mustError(r resp, status int, code string) {
	f.t.Helper()
	if r.status != status {
		f.t.Fatalf("HTTP %d, want %d; body %s", r.status, status, r.body)
	}
	if e := mustBuyerShape(f.t, r.body); e.Status != code {
		f.t.Fatalf("error %+v, want status %s", e, code)
	}
	if r.header.Get("Content-Type") != "application/json" {
		f.t.Fatalf("Content-Type %q", r.header.Get("Content-Type"))
	}
}

// auditRow is the audit table's row as read back with SQL.
type auditRow struct {
	ID             uint64
	RequestID      string
	Operator       string
	Action         string
	Activity       string
	Target         string
	Params         string
	StateBefore    string
	StateAfter     string
	Status         string
	ErrorCode      string
	HTTPStatus     int `gorm:"column:http_status"`
	Response       string
	IdempotencyKey *string
}

// rows reads the audit table directly, oldest first.
func (f *fixture) rows() []auditRow {
	f.t.Helper()
	var rs []auditRow
	if err := f.db.Table(f.table).Order("id").Find(&rs).Error; err != nil {
		f.t.Fatalf("read audit table: %v", err)
	}
	return rs
}

func (f *fixture) load(activity string, stock int64) {
	f.t.Helper()
	f.mustOK(f.post("/admin/activities/"+activity+"/load", `{"stock":`+itoa(stock)+`,"per_user_limit":1}`, ""), nil)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// jsonField decodes s and returns the value at key.
func jsonField(t *testing.T, s, key string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return m[key]
}

func (f *fixture) doCtx(ctx context.Context, r req) resp {
	f.t.Helper()
	hr := httptest.NewRequestWithContext(ctx, r.method, r.path, strings.NewReader(r.body))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+testToken)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, hr)
	return resp{status: w.Code, header: w.Header(), body: w.Body.String()}
}
