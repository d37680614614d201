package placement

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestDivide(t *testing.T) {
	tests := []struct {
		name    string
		total   int64
		weights []Weight
		want    []Share
		wantErr error
	}{
		{
			name:    "seed example 4 replicas 3:1",
			total:   4,
			weights: []Weight{{"member1", 3}, {"member2", 1}},
			want:    []Share{{"member1", 3}, {"member2", 1}},
		},
		{
			name:    "input order does not matter",
			total:   4,
			weights: []Weight{{"member2", 1}, {"member1", 3}},
			want:    []Share{{"member1", 3}, {"member2", 1}},
		},
		{
			name:    "equal weights tie broken by name",
			total:   5,
			weights: []Weight{{"c", 1}, {"b", 1}, {"a", 1}},
			want:    []Share{{"a", 2}, {"b", 2}, {"c", 1}},
		},
		{
			name:    "largest remainder wins before name",
			total:   10,
			weights: []Weight{{"a", 1}, {"b", 2}, {"c", 4}},
			// 10/7·(1,2,4) = 1.43, 2.86, 5.71 → floors 1,2,5 (8); remainders .43 .86 .71 → b, c
			want: []Share{{"a", 1}, {"b", 3}, {"c", 6}},
		},
		{
			name:    "zero weight gets nothing",
			total:   3,
			weights: []Weight{{"a", 0}, {"b", 1}, {"c", 1}},
			want:    []Share{{"a", 0}, {"b", 2}, {"c", 1}},
		},
		{
			name:    "zero total",
			total:   0,
			weights: []Weight{{"a", 0}, {"b", 0}},
			want:    []Share{{"a", 0}, {"b", 0}},
		},
		{
			name:    "fewer replicas than clusters",
			total:   2,
			weights: []Weight{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}},
			want:    []Share{{"a", 1}, {"b", 1}, {"c", 0}, {"d", 0}},
		},
		{
			name:    "huge values do not overflow",
			total:   math.MaxInt64,
			weights: []Weight{{"a", math.MaxInt64 / 2}, {"b", math.MaxInt64 / 2}},
			want:    []Share{{"a", math.MaxInt64/2 + 1}, {"b", math.MaxInt64 / 2}},
		},
		{name: "no clusters and nothing to divide", total: 0, want: []Share{}},
		{name: "no clusters", total: 1, wantErr: ErrNoWeight},
		{name: "all weights zero", total: 1, weights: []Weight{{"a", 0}}, wantErr: ErrNoWeight},
		{name: "negative total", total: -1, weights: []Weight{{"a", 1}}, wantErr: ErrNegative},
		{name: "negative weight", total: 1, weights: []Weight{{"a", -1}}, wantErr: ErrNegative},
		{name: "duplicate cluster", total: 1, weights: []Weight{{"a", 1}, {"a", 2}}, wantErr: ErrDuplicate},
		{name: "weights overflow", total: 1, weights: []Weight{{"a", math.MaxInt64}, {"b", math.MaxInt64}, {"c", 2}}, wantErr: ErrOverflow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Divide(tt.total, tt.weights)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Divide() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Divide() error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Divide() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDivideProperties checks on random inputs that the shares sum exactly
// to the total, that each share is within one of its exact quota, that
// zero-weight clusters get nothing and that input order is irrelevant.
func TestDivideProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for iter := 0; iter < 5000; iter++ {
		n := 1 + rng.IntN(len(names))
		weights := make([]Weight, n)
		var sum int64
		for i := range weights {
			weights[i] = Weight{Cluster: names[i], Weight: rng.Int64N(5)}
			sum += weights[i].Weight
		}
		if sum == 0 {
			weights[0].Weight = 1
			sum = 1
		}
		total := rng.Int64N(50)
		got, err := Divide(total, weights)
		if err != nil {
			t.Fatalf("Divide(%d, %v): %v", total, weights, err)
		}
		var gotSum int64
		byName := map[string]int64{}
		for _, s := range got {
			gotSum += s.Replicas
			byName[s.Cluster] = s.Replicas
		}
		if gotSum != total {
			t.Fatalf("Divide(%d, %v) = %v sums to %d", total, weights, got, gotSum)
		}
		for _, w := range weights {
			quota := float64(total) * float64(w.Weight) / float64(sum)
			r := float64(byName[w.Cluster])
			if r < math.Floor(quota) || r > math.Floor(quota)+1 {
				t.Fatalf("Divide(%d, %v): %s got %v, quota %.2f", total, weights, w.Cluster, r, quota)
			}
			if w.Weight == 0 && r != 0 {
				t.Fatalf("Divide(%d, %v): zero-weight %s got %v", total, weights, w.Cluster, r)
			}
		}
		shuffled := append([]Weight(nil), weights...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again, err := Divide(total, shuffled)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("Divide depends on input order: %v vs %v (%v)", got, again, err)
		}
	}
}
