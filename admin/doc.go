// Package admin is the operator's API of a sale: an http.Handler,
// mountable in any service under a prefix of its choosing, over a
// [Backend] (load, inspect, pause, resume, top up, withdraw, refund,
// reconcile, outbox retry, bans), with its own authentication hook and an audit log in
// a gorm database. The seckillctl command (examples/fullstack/cmd/seckillctl)
// is its client; the reference deployment (examples/fullstack/app) has the
// Backend over stock, order, outbox and risk.
//
// It is the operator plane, a composing piece: it imports no other package
// of the library, and no building block imports it. Bad configuration
// (a nil collaborator, a bad option, a short secret) wraps
// [ErrInvalidConfig]; WithLogger(nil) is one.
//
//	auth, err := admin.BearerToken(os.Getenv("SECKILL_ADMIN_TOKEN"), labelKey)
//	h, err := admin.New(backend, db, auth, admin.WithPrefix("/admin/"))
//	err = h.AutoMigrate(ctx)
//	mux.Handle("/admin/", h)
//
// # Routes
//
// Relative to the prefix ([WithPrefix]); README.md has the bodies and
// answers:
//
//	GET  activities/{activity}/stats
//	GET  activities/{activity}/reservations?user=U
//	GET  activities/{activity}/reservations/{reservation}   the story
//	POST activities/{activity}/load|pause|resume|topup|withdraw|reconcile
//	POST activities/{activity}/orders/{order}/refund
//	GET  outbox/stats                POST outbox/retry
//	GET  bans?kind=&after=&limit=    POST ban, POST unban
//	GET  audit?activity=&limit=&before=
//
// # Requests and answers
//
// Reads are GET, actions POST with a JSON body (Content-Type
// application/json, at most [WithMaxBody] bytes, unknown fields refused).
// Every answer is JSON; every error has one shape, [ErrorAnswer]:
// {"status":"…","message":"…"}, the buyer API's shape, with the status one
// of the Code… constants and a message that never carries an internal
// error's text (that goes to the logger with the request's X-Request-ID).
// IDs (activity, user, reservation, device, ban reason) are 1..[MaxIDLen]
// bytes of [A-Za-z0-9._@+-]; an IP ban takes an IP address.
//
// # Audit
//
// Every action — load, pause, resume, topup, withdraw, refund, reconcile
// (applied), outbox_retry, ban, unban — is recorded in the audit table
// ("seckill_admin_audit" unless [WithTable] names another) with the
// operator, the action, its activity or target, the request's parameters,
// the state before and after, the outcome and answer, the times and the
// request ID. The row is written before the
// action as an "attempt"; when it cannot be written the action is refused
// (503 audit_unavailable) and nothing is done. After the action the row is
// completed ("ok" or "failed"); if that write fails the answer is still
// sent (the action happened) and the row stays "attempt": an action of
// unknown outcome in the log, never an unrecorded one. Refusals before the
// action (authentication, validation, a missing dry run, a reused key)
// write no row.
//
// # Idempotency
//
// A POST action may carry an Idempotency-Key header (1..128 printable ASCII
// bytes). The key is stored with the audit row, unique per operator: a
// repeat of the same request answers the first answer (header
// Idempotent-Replayed: true) without acting again; the same key with a
// different request is 422 idempotency_key_reused; a repeat while the first
// is still running (or whose row stayed "attempt") is 409 in_progress.
//
// # Reconcile
//
// A reconcile must be rehearsed: POST …/reconcile with {} runs a dry run
// and returns a dry_run_id and its plan digest, good for one apply of the
// same activity within [WithDryRunWindow] (default 5 min);
// {"apply":true,"dry_run_id":…} without a valid one is 409
// dry_run_required, and with a "plan" that is not the dry run's, 409
// plan_changed. The apply releases the dry run's planned reservations that
// are still due and no other ([ReconcileParams.Plan]). Dry-run IDs live in the
// handler's memory: behind several replicas, the apply must reach the
// replica that ran the dry run.
//
// A Handler is safe for concurrent use. Backend mutations run on a context
// detached from the client's ([WithActionTimeout]), so a client that hangs
// up cannot cut an action, or its audit row, in half.
package admin
