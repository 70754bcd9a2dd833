//! The metadata footer DuckDB requires at the end of a loadable extension: 534 bytes appended
//! after the shared library. DuckDB reads it before it loads the library and refuses a file
//! without it ("metadata at the end of the file is invalid").
//!
//! Layout: a 22-byte WebAssembly custom-section header (so that a wasm build stays a valid
//! module), eight 32-byte NUL-padded ASCII fields, then a 256-byte signature (zeros: the
//! extension is unsigned, so DuckDB loads it only with `allow_unsigned_extensions`).
//!
//! The fields, in file order: three unused, the ABI type, the extension version, the DuckDB C
//! API version, the platform, and the magic value `4`. With ABI `C_STRUCT` the version is the
//! *minimum* C API version the extension needs, so one binary loads in every DuckDB from it on.

/// The ABI the extension is built against: the stable C API struct.
pub const ABI: &str = "C_STRUCT";
/// The oldest DuckDB C API the extension needs (DuckDB 1.5.6 and 2.0.x load it).
pub const C_API_VERSION: &str = "v1.5.6";
/// The platform of a Linux x86-64 build, as `PRAGMA platform` prints it.
pub const PLATFORM_LINUX_AMD64: &str = "linux_amd64";

/// The footer's length in bytes.
pub const FOOTER_LEN: usize = 22 + 8 * FIELD_LEN + SIGNATURE_LEN;
const FIELD_LEN: usize = 32;
const SIGNATURE_LEN: usize = 256;

/// Why a footer cannot be made.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum FooterError {
    /// A field is longer than its 32 bytes, or not ASCII.
    #[error("footer field {name} = {value:?} is not ASCII of at most 32 bytes")]
    Field {
        /// Which field.
        name: &'static str,
        /// The value given.
        value: String,
    },
}

/// The footer for an extension of this version, C API version and platform.
pub fn footer(
    extension_version: &str,
    c_api_version: &str,
    platform: &str,
) -> Result<Vec<u8>, FooterError> {
    let mut out = Vec::with_capacity(FOOTER_LEN);
    // The custom section: id 0, its length (531 = 3 + 16 + 512, LEB128), the name's length
    // and name, then the payload's length (512, LEB128).
    out.extend_from_slice(&[0x00, 0x93, 0x04, 0x10]);
    out.extend_from_slice(b"duckdb_signature");
    out.extend_from_slice(&[0x80, 0x04]);
    let fields: [(&'static str, &str); 8] = [
        ("unused 1", ""),
        ("unused 2", ""),
        ("unused 3", ""),
        ("abi type", ABI),
        ("extension version", extension_version),
        ("duckdb version", c_api_version),
        ("platform", platform),
        ("magic", "4"),
    ];
    for (name, value) in fields {
        if value.len() > FIELD_LEN || !value.is_ascii() {
            return Err(FooterError::Field {
                name,
                value: value.to_owned(),
            });
        }
        let mut field = [0u8; FIELD_LEN];
        field[..value.len()].copy_from_slice(value.as_bytes());
        out.extend_from_slice(&field);
    }
    out.extend_from_slice(&[0u8; SIGNATURE_LEN]);
    debug_assert_eq!(out.len(), FOOTER_LEN);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_has_the_layout_duckdb_reads() {
        let f = footer("v0.1.0", C_API_VERSION, PLATFORM_LINUX_AMD64).unwrap();
        assert_eq!(f.len(), 534);
        assert_eq!(&f[..4], &[0x00, 0x93, 0x04, 0x10]);
        assert_eq!(&f[4..20], b"duckdb_signature");
        assert_eq!(&f[20..22], &[0x80, 0x04]);
        let field = |i: usize| {
            let raw = &f[22 + i * 32..22 + (i + 1) * 32];
            let end = raw.iter().position(|&b| b == 0).unwrap_or(32);
            std::str::from_utf8(&raw[..end]).unwrap().to_owned()
        };
        assert_eq!(field(0), "");
        assert_eq!(field(3), "C_STRUCT");
        assert_eq!(field(4), "v0.1.0");
        assert_eq!(field(5), "v1.5.6");
        assert_eq!(field(6), "linux_amd64");
        assert_eq!(field(7), "4");
        assert!(f[22 + 8 * 32..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_field_too_long_is_refused() {
        let long = "x".repeat(33);
        let err = footer(&long, C_API_VERSION, PLATFORM_LINUX_AMD64).unwrap_err();
        assert!(err.to_string().contains("extension version"), "{err}");
    }
}
