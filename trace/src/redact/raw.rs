//! Lengths and integers read out of raw BSON bytes, each checked against the
//! message's end.

pub(super) fn i32_at(m: &[u8], at: usize) -> Result<i32, String> {
    m.get(at..at + 4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap_or_default()))
        .ok_or_else(|| "cut short".into())
}

pub(super) fn u32_at(m: &[u8], at: usize) -> Result<u32, String> {
    Ok(i32_at(m, at)? as u32)
}

/// A document's declared length, checked against the buffer.
pub(super) fn doc_len(m: &[u8], at: usize) -> Result<usize, String> {
    let n = i32_at(m, at)?;
    if n < 5 || at + n as usize > m.len() {
        return Err("bad document length".into());
    }
    Ok(n as usize)
}

/// The index of the NUL ending the C string at `at`.
pub(super) fn cstring_end(m: &[u8], at: usize) -> Result<usize, String> {
    m.get(at..)
        .and_then(|s| s.iter().position(|&b| b == 0))
        .map(|i| at + i)
        .ok_or_else(|| "unterminated name".into())
}

/// The size of a value of `kind` at `m[at..]`.
pub(super) fn value_len(m: &[u8], kind: u8, at: usize) -> Result<usize, String> {
    let string = |at: usize| -> Result<usize, String> {
        let n = i32_at(m, at)?;
        if n < 1 || m.get(at + 3 + n as usize) != Some(&0) {
            return Err("bad string".into());
        }
        Ok(4 + n as usize)
    };
    Ok(match kind {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x02 | 0x0D | 0x0E => string(at)?,
        0x03 | 0x04 => doc_len(m, at)?,
        0x05 => {
            let n = i32_at(m, at)?;
            if n < 0 {
                return Err("bad binary length".into());
            }
            5 + n as usize
        }
        0x06 | 0x0A | 0xFF | 0x7F => 0,
        0x07 => 12,
        0x08 => 1,
        0x0B => {
            let p = cstring_end(m, at)?;
            cstring_end(m, p + 1)? + 1 - at
        }
        0x0C => string(at)? + 12,
        0x0F => {
            // Total length, then a string, then a document, which must fill it exactly.
            let n = i32_at(m, at)?;
            let code = i32_at(m, at + 4)?;
            if n < 14 || code < 1 || m.get(at + 7 + code as usize) != Some(&0) {
                return Err("bad code with scope".into());
            }
            let scope = at + 8 + code as usize;
            if scope + doc_len(m, scope)? != at + n as usize {
                return Err("bad code with scope".into());
            }
            n as usize
        }
        0x10 => 4,
        0x13 => 16,
        k => return Err(format!("unknown BSON type {k:#04x}")),
    })
}
