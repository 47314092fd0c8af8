package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/admin/admintest"
	"github.com/seckillkit/seckill/internal/testenv"
)

// Mount the admin API under /admin/ and operate an activity with it.
func Example() {
	dir, err := os.MkdirTemp("", "admin-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := testenv.OpenSQLite(filepath.Join(dir, "audit.db"))
	if err != nil {
		panic(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}

	backend := admintest.NewMemory() // in a service: the Backend over stock, order, outbox, risk
	// The token: at least 32 bytes, from the environment. The label key
	// (the audit log's operator label): derived from a server secret.
	auth, err := admin.BearerToken("example-secret-0123456789abcdefghij", []byte("example-label-key-0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	h, err := admin.New(backend, db, auth, admin.WithPrefix("/admin/"))
	if err != nil {
		panic(err)
	}
	if err := h.AutoMigrate(context.Background()); err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(path, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/admin/"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer example-secret-0123456789abcdefghij")
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Print(resp.StatusCode, " ", string(b))
	}
	post("activities/42/load", `{"stock":100}`)
	post("activities/42/pause", `{}`)
	post("activities/42/reconcile", `{"apply":true}`)
	// Output:
	// 200 {"before":{"activity":"42","loaded":false,"paused":false,"remaining":0,"total":0,"per_user_limit":0},"after":{"activity":"42","loaded":true,"paused":false,"remaining":100,"total":100,"per_user_limit":0}}
	// 200 {"before":{"activity":"42","loaded":true,"paused":false,"remaining":100,"total":100,"per_user_limit":0},"after":{"activity":"42","loaded":true,"paused":true,"remaining":100,"total":100,"per_user_limit":0}}
	// 409 {"status":"dry_run_required","message":"run a dry run of this activity first and apply it with its dry_run_id before it expires"}
}
