package sample

import (
	"cmp"
	"math"
)

// Ordering of the candidates: best logit first, ties by lowest token id, a
// total order, so that every way of computing it gives the same sequence
// (and the same sums over it). A 32k vocabulary sorted by comparison cost
// about as much as a small model's decode step; the two below give the
// same result for less.

// better reports whether a comes before b.
func better(a, b cand) bool {
	if a.logit != b.logit {
		return a.logit > b.logit
	}
	return a.tok < b.tok
}

// compareCands is better as a three-way comparison (the reference order,
// in the tests).
func compareCands(a, b cand) int {
	if r := cmp.Compare(b.logit, a.logit); r != 0 {
		return r
	}
	return cmp.Compare(a.tok, b.tok)
}

// keyed is a candidate with its radix key.
type keyed struct {
	k uint64
	c cand
}

// radixKey maps a finite logit to a key whose ascending order is the
// logits' descending order (−0 and +0 equal, as they compare).
func radixKey(l float64) uint64 {
	if l == 0 {
		l = 0
	}
	k := math.Float64bits(l)
	if k>>63 != 0 {
		k = ^k
	} else {
		k |= 1 << 63
	}
	return ^k
}

// sortCands orders c (finite logits) best first: a least-significant-digit
// radix sort on the logit keys, 8 bits a pass, skipping passes where every
// key has the same digit, then ties by token id.
func (s *Sampler) sortCands(c []cand) {
	if len(c) < 64 {
		insertionSort(c)
		return
	}
	if cap(s.tmp) < 2*len(c) {
		s.tmp = make([]keyed, 2*len(c))
	}
	src, dst := s.tmp[:len(c)], s.tmp[len(c):2*len(c)]
	var diff uint64 // the bits where some key differs from the first
	for i, x := range c {
		src[i] = keyed{radixKey(x.logit), x}
		diff |= src[i].k ^ src[0].k
	}
	for shift := uint(0); shift < 64; shift += 8 {
		if byte(diff>>shift) == 0 {
			continue // one digit for all: the pass would not move anything
		}
		var count [256]int
		for _, x := range src {
			count[byte(x.k>>shift)]++
		}
		pos := 0
		for d, n := range count {
			count[d] = pos
			pos += n
		}
		for _, x := range src {
			d := byte(x.k >> shift)
			dst[count[d]] = x
			count[d]++
		}
		src, dst = dst, src
	}
	for i, x := range src {
		c[i] = x.c
	}
	// Equal logits in token order whatever the input order (topK's heap
	// mixes it): runs of ties are short, insertion sort is enough.
	for i := 0; i < len(c); {
		j := i + 1
		for j < len(c) && c[j].logit == c[i].logit {
			j++
		}
		if j-i > 1 {
			insertionSort(c[i:j])
		}
		i = j
	}
}

func insertionSort(c []cand) {
	for i := 1; i < len(c); i++ {
		x := c[i]
		j := i
		for ; j > 0 && better(x, c[j-1]); j-- {
			c[j] = c[j-1]
		}
		c[j] = x
	}
}

// topK returns the k best of c, best first (c sorted and cut to k, without
// sorting the rest): a heap of the k best so far, worst at the root.
func (s *Sampler) topK(c []cand, k int) []cand {
	h := c[:k]
	// Heapify with the worst candidate at the root.
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for _, x := range c[k:] {
		if better(x, h[0]) {
			h[0] = x
			siftDown(h, 0)
		}
	}
	s.sortCands(h)
	return h
}

// siftDown restores the heap property (every parent worse than its
// children) below i.
func siftDown(h []cand, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		w := l
		if r := l + 1; r < n && better(h[l], h[r]) {
			w = r
		}
		if !better(h[i], h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}
