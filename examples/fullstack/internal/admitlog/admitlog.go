// Package admitlog checks the reference deployment's admission log
// against the verified pre-queue order: the check `seckillctl queue
// verify` and the load generator's queue mode both run.
package admitlog

import (
	"fmt"
	"slices"
)

// Check checks batches, the admission log (each batch one Admit script,
// contiguous in the queue; instances may log their batches in another
// order), against order, the verified pre-queue: every user admitted once,
// the pre-queue's users in the verified order and before any later entry.
// It returns who was admitted and how many users of the pre-queue were
// skipped at their turn (abandoned), or the first violation.
func Check(order []string, batches [][]string) (admitted map[string]bool, skipped int, err error) {
	pre := make(map[string]int, len(order))
	for i, u := range order {
		pre[u] = i
	}
	place := func(b []string) int {
		if len(b) > 0 {
			if i, ok := pre[b[0]]; ok {
				return i
			}
		}
		return len(pre) // later entries after the pre-queue
	}
	sorted := slices.Clone(batches)
	slices.SortStableFunc(sorted, func(x, y []string) int { return place(x) - place(y) })
	admitted = map[string]bool{}
	last, later := -1, false
	for _, b := range sorted {
		for _, u := range b {
			i, ok := pre[u]
			switch {
			case admitted[u]:
				return admitted, 0, fmt.Errorf("user %s admitted twice", u)
			case !ok:
				later = true
			case later:
				return admitted, 0, fmt.Errorf("pre-queue user %s admitted after a later entry", u)
			case i < last:
				return admitted, 0, fmt.Errorf("pre-queue user %s admitted out of the verified order", u)
			default:
				last = i
			}
			admitted[u] = true
		}
	}
	for _, u := range order[:last+1] {
		if !admitted[u] {
			skipped++
		}
	}
	return admitted, skipped, nil
}
