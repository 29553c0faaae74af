package output

import "testing"

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct{ peak, max, step float64 }{{0, 1, 1}, {3, 3, 1}, {12, 15, 5}, {37, 40, 10}, {240, 300, 100}} {
		if max, step := NiceScale(tc.peak); max != tc.max || step != tc.step {
			t.Errorf("NiceScale(%v) = %v, %v; want %v, %v", tc.peak, max, step, tc.max, tc.step)
		}
	}
}

func TestCounts(t *testing.T) {
	got := Counts(map[string]int{"b": 2, "a": 2, "c": 5, "d": 1})
	if want := "c 5, a 2, b 2, d 1"; got != want {
		t.Errorf("Counts = %q, want %q", got, want)
	}
}
