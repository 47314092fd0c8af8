package testenv

import "sync"

type syncMap[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

func newSyncMap[K comparable, V any]() *syncMap[K, V] { return &syncMap[K, V]{m: map[K]V{}} }

func (s *syncMap[K, V]) getOrSet(k K, mk func() V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		return v
	}
	v := mk()
	s.m[k] = v
	return v
}
