//! Local store entries mapped into memory, found by address (issue 34: the merge's floor). The
//! merge writes its output files from slices of mapped entries (trajectory segments, rows);
//! given such a slice, [`source`] names the entry file and offset it came from, so the writer
//! can copy it file to file inside the kernel (`copy_file_range(2)`) instead of through a
//! user-space copy. Measured on Spider dev's slot-spider-variants store (528 MB, 2-core VM):
//! 0.15 s of system time copied file to file against 0.51–0.59 s written from the mapping.

use std::collections::BTreeMap;
use std::fs::File;
use std::sync::{Arc, Mutex, PoisonError};

/// Live mappings: start address → (length, the mapped file).
static REGIONS: Mutex<BTreeMap<usize, (usize, Arc<File>)>> = Mutex::new(BTreeMap::new());

/// A mapped entry file, listed in [`REGIONS`] while it lives: the owner of the `bytes::Bytes`
/// a local store hands out for a large entry ([`super::local`]).
pub(super) struct Mapped {
    map: memmap2::Mmap,
}

impl Mapped {
    /// `map`, a mapping of all of `file`, listed.
    pub(super) fn new(map: memmap2::Mmap, file: File) -> Mapped {
        REGIONS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(map.as_ptr() as usize, (map.len(), Arc::new(file)));
        Mapped { map }
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        REGIONS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(self.map.as_ptr() as usize));
    }
}

/// The entry file `bytes` were mapped from and their offset in it, when `bytes` lie inside one
/// live mapping (the caller holds them, so the mapping is alive); `None` for any other memory.
pub fn source(bytes: &[u8]) -> Option<(Arc<File>, u64)> {
    let start = bytes.as_ptr() as usize;
    let regions = REGIONS.lock().unwrap_or_else(PoisonError::into_inner);
    let (&base, (len, file)) = regions.range(..=start).next_back()?;
    (start + bytes.len() <= base + len).then(|| (file.clone(), (start - base) as u64))
}

/// Copies the `len` bytes at `offset` in `src` (a slice of a mapped entry, [`source`]) to `out`
/// at its current position (advancing it) inside the kernel; returns how many bytes were copied
/// — fewer than `len` (down to 0) when the kernel refuses or stops (another filesystem on an old
/// kernel, an unsupported file type), and the caller writes the rest itself.
pub fn copy_to(src: &File, offset: u64, len: usize, out: &File) -> usize {
    let (mut off_in, mut done) = (offset, 0);
    while done < len {
        match rustix::fs::copy_file_range(src, Some(&mut off_in), out, None, len - done) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_of_a_mapped_entry_is_found_and_copied_file_to_file() {
        use std::io::{Read, Seek, Write};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry");
        let data: Vec<u8> = (0..(3 << 20)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: a test file no one else writes.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        let bytes = bytes::Bytes::from_owner(Mapped::new(map, file));
        let slice = bytes.slice(1000..(2 << 20));
        let (src, offset) = source(&slice).expect("mapped");
        assert_eq!(offset, 1000);
        // Memory that is not a mapping is not found; nor is a slice once its mapping is gone.
        assert!(source(&data[10..20]).is_none());
        let mut out = tempfile::tempfile().unwrap();
        out.write_all(b"head").unwrap();
        assert_eq!(copy_to(&src, offset, slice.len(), &out), slice.len());
        out.write_all(b"tail").unwrap();
        let mut back = Vec::new();
        out.rewind().unwrap();
        out.read_to_end(&mut back).unwrap();
        assert_eq!(back, [&b"head"[..], &slice[..], b"tail"].concat());
        // Dropped, the mapping leaves the registry (checked by its file, not its address: a
        // test running alongside may map a new region where this one was).
        let listed = Arc::downgrade(&src);
        drop((bytes, slice, src));
        assert!(listed.upgrade().is_none(), "the registry let go of a dropped mapping");
    }
}
