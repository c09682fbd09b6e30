package lambdaenv

import "testing"

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		want   int64
		wantOK bool
	}{
		{"128 MB", map[string]string{FunctionMemory: "128"}, 100 << 20, true},
		{"10 GB", map[string]string{FunctionMemory: "10240"}, 10212 << 20, true},
		{"half at least", map[string]string{FunctionMemory: "40"}, 20 << 20, true},
		{"GOMEMLIMIT wins", map[string]string{FunctionMemory: "128", "GOMEMLIMIT": "off"}, 0, false},
		{"not in Lambda", map[string]string{}, 0, false},
		{"not a number", map[string]string{FunctionMemory: "lots"}, 0, false},
		{"zero", map[string]string{FunctionMemory: "0"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MemoryLimit(func(k string) string { return tc.env[k] })
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("MemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestBytesInFlight(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int64
	}{
		{map[string]string{FunctionMemory: "128"}, 4 << 20},
		{map[string]string{FunctionMemory: "1769"}, 1769 << 20 / 32},
		{map[string]string{FunctionMemory: "10240", "GOMEMLIMIT": "off"}, 320 << 20},
		{map[string]string{}, 0},
		{map[string]string{FunctionMemory: "lots"}, 0},
	} {
		if got := BytesInFlight(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("BytesInFlight(%v) = %d, want %d", tc.env, got, tc.want)
		}
	}
}

func TestMemoryMB(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{FunctionMemory: "1024"}, 1024},
		{map[string]string{FunctionMemory: " 128 "}, 128},
		{map[string]string{}, 0},
		{map[string]string{FunctionMemory: "-5"}, 0},
		{map[string]string{FunctionMemory: "lots"}, 0},
	} {
		if got := MemoryMB(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("MemoryMB(%v) = %d, want %d", tc.env, got, tc.want)
		}
	}
}
