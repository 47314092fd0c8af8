package risk

import "context"

type userKey struct{}
type decisionKey struct{}

// WithUser returns a copy of ctx carrying the authenticated user ID.
func WithUser(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, userKey{}, userID)
}

// UserFrom returns the user ID put in ctx by the [NewAuth] middleware (or
// [WithUser]).
func UserFrom(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userKey{}).(string)
	return u, ok && u != ""
}

// withDecision returns a copy of ctx carrying d.
func withDecision(ctx context.Context, d Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}

// DecisionFrom returns the decision put in ctx by the [NewMiddleware]
// middleware.
func DecisionFrom(ctx context.Context) (Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(Decision)
	return d, ok
}
