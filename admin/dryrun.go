package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"time"
)

// maxDryRuns bounds the dry runs waiting to be applied; past it the one
// expiring soonest is forgotten.
const maxDryRuns = 1024

type dryRun struct {
	activity string
	report   ReconcileReport // as answered: each list cut to MaxListed
	plan     string          // planDigest of the activity and report.Release
	expires  time.Time
}

// planDigest identifies a reconcile plan: the activity and the reservations
// its dry run listed for release (in any order), as 64 hex digits.
func planDigest(activity string, release []string) string {
	ids := slices.Clone(release)
	slices.Sort(ids)
	h := sha256.New()
	h.Write([]byte("seckill reconcile plan v1\x00" + activity))
	for _, id := range ids {
		h.Write([]byte("\x00" + id))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// dryRuns remembers the reconcile dry runs of this handler, each good for
// one apply of the same activity before it expires. It is in memory: with
// several replicas, the apply must reach the replica that ran the dry run
// (or the operator runs the dry run again). Safe for concurrent use.
type dryRuns struct {
	mu  sync.Mutex
	m   map[string]dryRun
	ttl time.Duration
}

func newDryRuns(ttl time.Duration) *dryRuns {
	return &dryRuns{m: map[string]dryRun{}, ttl: ttl}
}

// issue records a dry run (its report as answered: the plan is its Release
// list) and returns its ID and expiry.
func (d *dryRuns) issue(activity string, rep ReconcileReport, now time.Time) (string, time.Time) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	exp := now.Add(d.ttl)
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, v := range d.m {
		if !now.Before(v.expires) {
			delete(d.m, k)
		}
	}
	if len(d.m) >= maxDryRuns {
		var oldest string
		for k, v := range d.m {
			if oldest == "" || v.expires.Before(d.m[oldest].expires) {
				oldest = k
			}
		}
		delete(d.m, oldest)
	}
	d.m[id] = dryRun{activity: activity, report: rep, plan: planDigest(activity, rep.Release), expires: exp}
	return id, exp
}

// take consumes the dry run id of activity if it is still valid at now. It
// returns the dry run and a function that gives it back (used when the
// apply is refused before it acts).
func (d *dryRuns) take(activity, id string, now time.Time) (dryRun, func(), bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.m[id]
	if !ok || v.activity != activity || !now.Before(v.expires) {
		return dryRun{}, nil, false
	}
	delete(d.m, id)
	return v, func() {
		d.mu.Lock()
		d.m[id] = v
		d.mu.Unlock()
	}, true
}
