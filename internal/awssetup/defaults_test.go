package awssetup

import (
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/pkg/claims"
	"github.com/s3sqs/s3sqs/pkg/dataset"
	"github.com/s3sqs/s3sqs/pkg/engine"
	"github.com/s3sqs/s3sqs/pkg/settings"
	"github.com/s3sqs/s3sqs/pkg/sqsbatch"
)

// TestLibraryDefaultsAreTheTables holds the defaults the libraries apply
// to a zero Options field to the settings table's, which the functions,
// the CLI and docs/configuration.md read. The libraries do not import the
// table (docs/packages.md's rules), so each default is written twice and
// kept equal here.
func TestLibraryDefaultsAreTheTables(t *testing.T) {
	size := func(s settings.Size) int64 { n, _ := s.Parse(s.Default); return n }
	count := func(c settings.Count) int64 { n, _ := c.Parse(c.Default); return n }
	ttl, _ := settings.ClaimsTTL.Parse(settings.ClaimsTTL.Default)
	for _, c := range []struct {
		row        settings.Row
		table, lib int64
	}{
		{settings.ChunkSize.Row, size(settings.ChunkSize), dataset.DefaultChunkSize},
		{settings.InlineMaxBytes.Row, size(settings.InlineMaxBytes), engine.DefaultInlineMaxBytes},
		{settings.MaxInFlight.Row, count(settings.MaxInFlight), sqsbatch.DefaultMaxInFlight},
		{settings.MaxAttempts.Row, count(settings.MaxAttempts), sqsbatch.DefaultMaxAttempts},
		{settings.ChunkConcurrency.Row, count(settings.ChunkConcurrency), engine.DefaultChunkConcurrency},
		{settings.ReadConcurrency.Row, count(settings.ReadConcurrency), engine.DefaultReadConcurrency},
		{settings.ClaimsTTL.Row, int64(ttl / time.Second), int64(claims.DefaultTTL / time.Second)},
	} {
		if c.table != c.lib || c.table == 0 {
			t.Errorf("%s: the settings table's default %q is %d, the library's %d", c.row.Env, c.row.Default, c.table, c.lib)
		}
	}
}
