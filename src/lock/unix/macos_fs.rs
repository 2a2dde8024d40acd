//! macOS filesystems by name (`statfs.f_fstypename`; statfs(2): "type of
//! file system", the name `mount -t` takes). Not `f_type`: statfs(2) says
//! nothing of its values, which are assigned as filesystems register. Not
//! the `MNT_LOCAL` flag either: which local filesystems set it is up to each
//! one, and a local one without it would be refused by mistake. Pure, so
//! that it is tested on Linux too.

use super::os::FsKind;

/// Network filesystems, where `flock` is forwarded to (or emulated over) a
/// server, and a network partition can leave two holders: NFS (NLM or v4
/// locks), SMB, AFP, WebDAV, FTP (`mount_ftp`).
const NETWORK: &[&str] = &["nfs", "smbfs", "afpfs", "webdav", "ftp", "cifs"];

/// Filesystems whose files are not files: `devfs` (device nodes, refused as
/// non-regular anyway) and `fdesc` (`/dev/fd/N` opens whatever descriptor N
/// is, so a record would be written into that file).
const PSEUDO: &[&str] = &["devfs", "fdesc"];

/// `name`: `f_fstypename` up to its NUL.
pub(super) fn fs_kind_by_name(name: &[u8]) -> FsKind {
    if let Some(fs) = PSEUDO.iter().find(|n| n.as_bytes() == name) {
        return FsKind::Pseudo(fs);
    }
    match NETWORK.iter().find(|n| n.as_bytes() == name) {
        Some(fs) => FsKind::Network(fs),
        None => FsKind::Local,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(fs_kind_by_name(b"apfs"), FsKind::Local);
        assert_eq!(fs_kind_by_name(b"hfs"), FsKind::Local);
        assert_eq!(fs_kind_by_name(b"msdos"), FsKind::Local);
        assert_eq!(fs_kind_by_name(b"nfs"), FsKind::Network("nfs"));
        assert_eq!(fs_kind_by_name(b"smbfs"), FsKind::Network("smbfs"));
        assert_eq!(fs_kind_by_name(b"afpfs"), FsKind::Network("afpfs"));
        assert_eq!(fs_kind_by_name(b"webdav"), FsKind::Network("webdav"));
        assert_eq!(fs_kind_by_name(b"devfs"), FsKind::Pseudo("devfs"));
        assert_eq!(fs_kind_by_name(b"fdesc"), FsKind::Pseudo("fdesc"));
        assert_eq!(fs_kind_by_name(b""), FsKind::Local);
        assert_eq!(fs_kind_by_name(b"nfsx"), FsKind::Local);
    }
}
