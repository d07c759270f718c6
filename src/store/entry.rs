//! The bytes of a store entry, bound to the key it is stored under (issue 34 item 4).
//!
//! | bytes     | what                                                                       |
//! |-----------|----------------------------------------------------------------------------|
//! | 0..8      | [`MAGIC`], `tfentry2` (the format; anything else is not an entry)          |
//! | 8..40     | the key's digest (the 32 raw bytes of [`super::StageKey::digest`])         |
//! | 40..56    | the checksum: XXH3-128 of (key digest ‖ payload), seeded by the digest     |
//! | 56..      | the payload                                                                |
//!
//! A reader asks for a key and gets the payload only when all three agree with that key: an entry
//! of another key copied under this name names the other key; garbage that carries a valid
//! checksum of itself (an older format, or foreign bytes) lacks the header; a torn or edited
//! payload fails the checksum, which also covers the recorded digest. A payload that passes and
//! still does not decode is the stage's to reject ([`super::Store::load`]).
//!
//! Why XXH3 and not BLAKE3 (format 1 used a keyed BLAKE3): the checksum guards against torn,
//! corrupt and misplaced entries, not against a forger — the key digests are public, so whoever
//! can write the store can write a valid entry under any checksum. XXH3-128 detects a random
//! change with probability 1 − 2⁻¹²⁸ and hashes ~4× faster than BLAKE3 on one core (about 20 against
//! 5 GB/s here), and every
//! read of every entry pays for it (the merge reads the whole store: issue 34's merge floor).
//! Spec: <https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md>.

/// The first 8 bytes of every entry (format version 2).
pub const MAGIC: &[u8; 8] = b"tfentry2";

/// Bytes before the payload: magic, key digest, checksum.
pub const HEADER: usize = 8 + 32 + 16;

/// The 32 raw bytes of a hex key digest (a string that is not 64 hex digits is hashed, so any
/// name still gets a fixed binding).
fn raw_digest(digest: &str) -> [u8; 32] {
    blake3::Hash::from_hex(digest)
        .map(|h| *h.as_bytes())
        .unwrap_or_else(|_| *blake3::hash(digest.as_bytes()).as_bytes())
}

/// The entry bytes of `payload` under the key whose hex digest is `digest`.
pub fn frame(digest: &str, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER + payload.len());
    bytes.extend_from_slice(&header(digest, &[payload]));
    bytes.extend_from_slice(payload);
    bytes
}

/// The [`HEADER`] bytes that go before a payload made of `parts` one after the other (the
/// entry is the header, then the parts: [`frame`] without joining them first).
pub fn header(digest: &str, parts: &[&[u8]]) -> [u8; HEADER] {
    let raw = raw_digest(digest);
    let mut out = [0u8; HEADER];
    out[..8].copy_from_slice(MAGIC);
    out[8..40].copy_from_slice(&raw);
    out[40..].copy_from_slice(&checksum(&raw, parts));
    out
}

/// XXH3-128 of the key digest then `parts`, seeded by the digest's first 8 bytes (so the
/// checksum differs per key even for an empty payload).
fn checksum(raw: &[u8; 32], parts: &[&[u8]]) -> [u8; 16] {
    let seed = u64::from_le_bytes(raw[..8].try_into().expect("8 bytes"));
    let mut hasher = twox_hash::XxHash3_128::with_seed(seed);
    hasher.write(raw);
    for p in parts {
        hasher.write(p);
    }
    hasher.finish_128().to_le_bytes()
}

/// The payload of `bytes` read under the key `digest`, or why the entry cannot be trusted:
/// `truncated to N bytes`, `not a keyed entry (older format or foreign bytes)`,
/// `entry of another key (<12 hex>…)`, `payload hash mismatch`.
pub fn open<'a>(digest: &str, bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < HEADER {
        // Shorter than a header: a torn write, or an entry of the old format (32-byte header).
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] == MAGIC {
            return Err(format!("truncated to {} bytes", bytes.len()));
        }
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a keyed entry (older format or foreign bytes)".into());
    }
    let raw = raw_digest(digest);
    let recorded = &bytes[8..40];
    if recorded != raw {
        let hex: String = recorded[..6].iter().map(|b| format!("{b:02x}")).collect();
        return Err(format!("entry of another key ({hex}…)"));
    }
    let payload = &bytes[HEADER..];
    if checksum(&raw, &[payload]) != bytes[40..HEADER] {
        return Err("payload hash mismatch".into());
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aa00000000000000000000000000000000000000000000000000000000000001";
    const B: &str = "bb00000000000000000000000000000000000000000000000000000000000002";

    #[test]
    fn an_entry_opens_only_under_its_own_key() {
        let bytes = frame(A, b"payload");
        assert_eq!(open(A, &bytes), Ok(&b"payload"[..]));
        assert_eq!(open(B, &bytes), Err("entry of another key (aa0000000000…)".into()));
    }

    #[test]
    fn an_entry_written_in_parts_opens_to_the_parts_joined() {
        let parts: [&[u8]; 3] = [b"head\n", b"", b"body bytes"];
        let mut bytes = header(A, &parts).to_vec();
        parts.iter().for_each(|p| bytes.extend_from_slice(p));
        assert_eq!(bytes, frame(A, b"head\nbody bytes"));
        assert_eq!(open(A, &bytes), Ok(&b"head\nbody bytes"[..]));
        // A store writes them in turn: the local file holds the same bytes.
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open_url(dir.path().to_str().unwrap()).unwrap();
        let key = crate::store::StageKey {
            stage: "t".into(),
            version: 1,
            config: serde_json::Value::Null,
            inputs: vec![],
        };
        store.put_parts(&key, &parts).unwrap();
        assert_eq!(
            store.load(&key, |b| Ok::<_, String>(b.to_vec())),
            Some(b"head\nbody bytes".to_vec())
        );
    }

    #[test]
    fn garbage_with_a_valid_checksum_of_itself_is_not_an_entry() {
        // Format 0: blake3(payload) then the payload, whatever the payload is.
        let garbage = b"not a stage output at all, but long enough to pass a length check........";
        let mut bytes = blake3::hash(garbage).as_bytes().to_vec();
        bytes.extend_from_slice(garbage);
        assert_eq!(
            open(A, &bytes),
            Err("not a keyed entry (older format or foreign bytes)".into())
        );
        // Format 1: `tfentry1`, the digest, a keyed BLAKE3 of the payload: valid then, not now.
        let raw = raw_digest(A);
        let mut v1 = b"tfentry1".to_vec();
        v1.extend_from_slice(&raw);
        v1.extend_from_slice(blake3::keyed_hash(&raw, garbage).as_bytes());
        v1.extend_from_slice(garbage);
        assert_eq!(
            open(A, &v1),
            Err("not a keyed entry (older format or foreign bytes)".into())
        );
    }

    #[test]
    fn torn_and_edited_entries_are_named() {
        let bytes = frame(A, b"payload");
        assert_eq!(open(A, &bytes[..20]), Err("truncated to 20 bytes".into()));
        assert_eq!(open(A, &bytes[..5]), Err("truncated to 5 bytes".into()));
        let mut edited = bytes.clone();
        *edited.last_mut().unwrap() ^= 1;
        assert_eq!(open(A, &edited), Err("payload hash mismatch".into()));
        // Every single-bit change of the checksum itself is caught too.
        for bit in 0..8 * 16 {
            let mut edited = bytes.clone();
            edited[40 + bit / 8] ^= 1 << (bit % 8);
            assert_eq!(open(A, &edited), Err("payload hash mismatch".into()), "bit {bit}");
        }
        // An empty payload still has a checksum bound to its key.
        assert_ne!(frame(A, b"")[40..], frame(B, b"")[40..]);
    }

    #[test]
    fn a_header_of_parts_equals_the_header_of_the_joined_payload_at_every_split() {
        // XXH3 changes its inner path at 16, 128, 240 bytes, each 64-byte stripe, each 1024-byte
        // block and its 256-byte streaming buffer: a store writes an entry in parts
        // ([`header`]) and reads it whole ([`open`]), so every split must hash alike.
        let payload: Vec<u8> = (0..2600u32).map(|i| (i * 131 % 251) as u8).collect();
        let lens = [
            0, 1, 3, 4, 8, 9, 16, 17, 64, 128, 129, 240, 241, 255, 256, 257, 512, 1023, 1024, 1025, 2048, 2600,
        ];
        for len in lens {
            let p = &payload[..len];
            let whole = header(A, &[p]);
            for cut in 0..=len {
                assert_eq!(header(A, &[&p[..cut], &p[cut..]]), whole, "{len} cut at {cut}");
            }
            for a in (0..=len).step_by(37) {
                for b in (a..=len).step_by(53) {
                    assert_eq!(
                        header(A, &[&p[..a], &p[a..b], b"", &p[b..]]),
                        whole,
                        "{len} cut at {a}, {b}"
                    );
                }
            }
            let mut bytes = whole.to_vec();
            bytes.extend_from_slice(p);
            assert_eq!(open(A, &bytes), Ok(p), "{len}");
        }
    }
}
