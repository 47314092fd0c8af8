package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// Error codes: the "status" of an [ErrorAnswer], with the HTTP status that
// goes with each.
const (
	CodeBadRequest       = "bad_request"            // 400: malformed JSON, unknown field, bad query
	CodeInvalidArgument  = "invalid_argument"       // 400: a value out of range or an ID outside the alphabet
	CodeUnauthorized     = "unauthorized"           // 401
	CodeForbidden        = "forbidden"              // 403
	CodeNotFound         = "not_found"              // 404: no such route, activity, reservation
	CodeMethodNotAllowed = "method_not_allowed"     // 405
	CodeConflict         = "conflict"               // 409: the backend refused the action in this state
	CodeDryRunRequired   = "dry_run_required"       // 409: reconcile apply without a valid dry-run ID
	CodePlanChanged      = "plan_changed"           // 409: reconcile apply whose plan digest is not its dry run's
	CodeInProgress       = "in_progress"            // 409: the Idempotency-Key's first request has not finished
	CodePayloadTooLarge  = "payload_too_large"      // 413
	CodeUnsupportedMedia = "unsupported_media_type" // 415: POST without Content-Type: application/json
	CodeKeyReused        = "idempotency_key_reused" // 422: the key was used for a different request
	CodeInternal         = "internal"               // 500
	CodeUnavailable      = "unavailable"            // 503: a backing store is down
	CodeAuditUnavailable = "audit_unavailable"      // 503: the audit row cannot be written; nothing was done
	CodeTimeout          = "timeout"                // 504: the backend did not answer in time
)

// apiError is an error answer. Its message is written for the client and
// never carries an internal error's text.
type apiError struct {
	status  int
	code    string
	message string
}

// ErrorAnswer is the body of every error answer of the admin API:
//
//	{"status":"dry_run_required","message":"run a dry run of this activity first …"}
//
// Status is one of the Code… constants, a machine code to branch on (the
// HTTP status goes with it); Message is generic text for a person and never
// carries an internal error's text. It is the one error body of the
// library's HTTP APIs: checkout/checkouthttp answers the buyer's refusals
// in it (and so does the reference deployment's buyer API), and the
// seckillctl client decodes with it, so one type reads the errors of both
// APIs.
type ErrorAnswer struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func (e apiError) body() []byte {
	return marshal(ErrorAnswer{Status: e.code, Message: e.message})
}

func badRequest(msg string) apiError { return apiError{http.StatusBadRequest, CodeBadRequest, msg} }
func invalidArg(msg string) apiError {
	return apiError{http.StatusBadRequest, CodeInvalidArgument, msg}
}
func notFound() apiError { return apiError{http.StatusNotFound, CodeNotFound, "not found"} }
func internalError() apiError {
	return apiError{http.StatusInternalServerError, CodeInternal, "internal error"}
}
func auditUnavailable() apiError {
	return apiError{http.StatusServiceUnavailable, CodeAuditUnavailable, "the audit log cannot be written; nothing was done"}
}

// backendError maps a Backend error to its answer.
func backendError(err error) apiError {
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound()
	case errors.Is(err, ErrConflict):
		return apiError{http.StatusConflict, CodeConflict, "the action conflicts with the current state"}
	case errors.Is(err, ErrInvalidArgument):
		return invalidArg("invalid argument")
	case errors.Is(err, ErrUnavailable):
		return apiError{http.StatusServiceUnavailable, CodeUnavailable, "a backing store is unavailable; retry later"}
	case errors.Is(err, context.DeadlineExceeded):
		return apiError{http.StatusGatewayTimeout, CodeTimeout, "the backend did not answer in time"}
	}
	return internalError()
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, e apiError) {
	writeJSON(w, e.status, e.body())
}

// marshal encodes v; the API's own types always encode.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}
