package app

import (
	"context"
	"fmt"
	"time"
)

// CaptchaAnswer returns the answer of the captcha id issued to user in demo
// mode, for a user the demo hook does not serve (not a demo user).
func CaptchaAnswer(ctx context.Context, a *App, id, user string) (string, bool) {
	return a.p.captcha.Answer(ctx, id, user)
}

// LedgerEntries counts the entries (held, freed and tombstones) of the
// sale's stock ledger in Redis.
func LedgerEntries(ctx context.Context, a *App) (int, error) {
	seen := map[string]bool{}
	var cursor uint64
	for pages := 0; ; pages++ {
		page, next, err := a.p.stock.Reservations(ctx, a.sale.act.ID, cursor, 100)
		if err != nil {
			return 0, err
		}
		for _, r := range page {
			seen[r.ID] = true
		}
		if next == 0 {
			return len(seen), nil
		}
		if pages > 10000 {
			return 0, fmt.Errorf("ledger cursor does not end")
		}
		cursor = next
	}
}

// SessionFor signs user in directly (any valid user ID, also outside the
// demo users) and returns the bearer token.
func SessionFor(ctx context.Context, a *App, user string) (string, error) {
	return a.p.sessions.Create(ctx, user, time.Hour)
}
