package dataset

import "testing"

// TestArchiveOf holds Object.Archive to what S3 does with a GET: GLACIER
// and DEEP_ARCHIVE objects and Intelligent-Tiering's archive tiers are
// refused (InvalidObjectState) until a restore completes; Glacier Instant
// Retrieval and the rest are read.
func TestArchiveOf(t *testing.T) {
	const done = `ongoing-request="false", expiry-date="Fri, 23 Dec 2026 00:00:00 GMT"`
	tests := []struct {
		class, status, restore, want string
	}{
		{"", "", "", ""},
		{"STANDARD_IA", "", "", ""},
		{"GLACIER_IR", "", "", ""},
		{"GLACIER", "", "", "GLACIER"},
		{"DEEP_ARCHIVE", "", "", "DEEP_ARCHIVE"},
		{"GLACIER", "", `ongoing-request="true"`, "GLACIER"},
		{"GLACIER", "", done, ""},
		{"DEEP_ARCHIVE", "", done, ""},
		{"INTELLIGENT_TIERING", "", "", ""},
		{"INTELLIGENT_TIERING", "ARCHIVE_ACCESS", "", "INTELLIGENT_TIERING ARCHIVE_ACCESS"},
		{"INTELLIGENT_TIERING", "DEEP_ARCHIVE_ACCESS", `ongoing-request="true"`, "INTELLIGENT_TIERING DEEP_ARCHIVE_ACCESS"},
		{"INTELLIGENT_TIERING", "ARCHIVE_ACCESS", done, ""},
	}
	for _, tt := range tests {
		if got := archiveOf(tt.class, tt.status, tt.restore); got != tt.want {
			t.Errorf("archiveOf(%q, %q, %q) = %q, want %q", tt.class, tt.status, tt.restore, got, tt.want)
		}
	}
	for c, want := range map[string]bool{"GLACIER": true, "DEEP_ARCHIVE": true, "INTELLIGENT_TIERING": true, "GLACIER_IR": false, "STANDARD": false, "": false} {
		if got := mayBeArchived(c); got != want {
			t.Errorf("mayBeArchived(%q) = %v", c, got)
		}
	}
}
