package dataset

import (
	"context"
	"errors"
	"strings"
)

// archivedClasses are the storage classes whose objects a GET refuses
// (InvalidObjectState) until they are restored. INTELLIGENT_TIERING is
// among them only in its archive tiers, which HeadObject's ArchiveStatus
// tells; GLACIER_IR is read as any other.
var archivedClasses = map[string]bool{"GLACIER": true, "DEEP_ARCHIVE": true}

// archiveTiers are Intelligent-Tiering's access tiers that need a restore,
// as HeadObject's ArchiveStatus and an inventory's
// IntelligentTieringAccessTier name them.
var archiveTiers = map[string]bool{"ARCHIVE_ACCESS": true, "DEEP_ARCHIVE_ACCESS": true}

// storageClass is Object.StorageClass for class c as S3 gives it: empty
// for STANDARD, which a listing names and HeadObject leaves out, so that
// an object is the same whichever pinned it.
func storageClass(c string) string {
	if c == "STANDARD" {
		return ""
	}
	return c
}

// mayBeArchived reports whether an object a listing gives in storage
// class c may need a restore before it is read: HeadObject tells.
func mayBeArchived(c string) bool {
	return archivedClasses[c] || c == "INTELLIGENT_TIERING"
}

// archiveOf is Object.Archive for an object of storage class c, with
// HeadObject's ArchiveStatus and Restore: empty when a GET reads it (a
// class that needs no restore, or a restored copy ready:
// `ongoing-request="false"`).
func archiveOf(c, archiveStatus, restore string) string {
	if strings.Contains(restore, `ongoing-request="false"`) {
		return ""
	}
	switch {
	case archivedClasses[c]:
		return c
	case archiveTiers[archiveStatus]:
		return "INTELLIGENT_TIERING " + archiveStatus
	}
	return ""
}

// archived settles Archive, with HeadObject, for the object of l when its
// listing gave a class that may need a restore; the rest keep what the
// listing said. The versions of a key (Source.Versions) are left as
// listed: a replay announces them, it does not read them. An object gone
// since it was listed is l.Err, as a manifest's missing object is.
func archived(ctx context.Context, client ListAPI, l Listed) (Listed, error) {
	o := l.Object
	if l.settled || len(l.Versions) > 0 || !mayBeArchived(o.StorageClass) || o.Archive != "" {
		return l, nil
	}
	h, err := Head(ctx, client, o.Bucket, o.Key, o.VersionID)
	switch {
	case errors.Is(err, ErrNotFound):
		l.Err = err
	case err != nil:
		return l, err
	default:
		l.StorageClass, l.Archive = h.StorageClass, h.Archive
	}
	return l, nil
}
