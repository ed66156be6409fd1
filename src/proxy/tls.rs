//! TLS on either side, with rustls. Toward clients, mongotap terminates TLS with
//! the flags mongod users know (`--tls-certificate-key-file`: the certificate chain
//! and its key in one PEM file; `--tls-ca-file`: require client certificates signed
//! by these CAs). Toward the upstream, it originates TLS from the upstream URI's own
//! options, as drivers read them (`tls`/`ssl`, `tlsCAFile`, `tlsCertificateKeyFile`,
//! `tlsAllowInvalidCertificates`/`tlsInsecure`), with SNI from the host. Either side
//! may stay plaintext. The bytes inside are forwarded and tapped exactly as over TCP.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS toward clients.
#[derive(Clone)]
pub struct ClientTls {
    acceptor: TlsAcceptor,
    verifies_clients: bool,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientTls {{ verifies_clients: {} }}", self.verifies_clients)
    }
}

impl ClientTls {
    /// From mongod's `--tlsCertificateKeyFile` (chain and key in one PEM file) and,
    /// optionally, `--tlsCAFile` (clients must then present a certificate it signed).
    pub fn new(certificate_key_file: &Path, client_ca_file: Option<&Path>) -> Result<ClientTls, String> {
        let certs = certificates(certificate_key_file)?;
        let key = private_key(certificate_key_file)?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match client_ca_file {
            Some(ca) => {
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots(ca)?),
                    provider(),
                )
                .build()
                .map_err(|e| format!("--tls-ca-file {}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(certs, key)
            .map_err(|e| format!("--tls-certificate-key-file {}: {e}", certificate_key_file.display()))?;
        Ok(ClientTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            verifies_clients: client_ca_file.is_some(),
        })
    }

    /// Completes the TLS handshake of an accepted connection.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
        self.acceptor.accept(tcp).await
    }
}

/// TLS options of an upstream URI, as drivers read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// CAs to verify the server with (the system's web roots when absent).
    pub ca_file: Option<PathBuf>,
    /// A client certificate and key, in one PEM file.
    pub certificate_key_file: Option<PathBuf>,
    /// Accept any server certificate (staging only; logged loudly).
    pub allow_invalid_certificates: bool,
}

impl TlsOptions {
    /// The TLS options of a `mongodb://` URI, `None` when it asks for no TLS.
    pub fn from_uri(uri: &str) -> Result<Option<TlsOptions>, String> {
        let Some((_, query)) = uri.split_once('?') else { return Ok(None) };
        let (mut tls, mut explicit_off) = (false, false);
        let mut opts = TlsOptions::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(v);
            let yes = || match v.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                other => Err(format!("{k}={other}: expected true or false")),
            };
            // URI option names are case-insensitive.
            match k.to_ascii_lowercase().as_str() {
                "tls" | "ssl" => {
                    tls = yes()?;
                    explicit_off = !tls;
                }
                "tlsallowinvalidhostnames" if yes()? => {
                    return Err("tlsAllowInvalidHostnames is not supported: give the host the certificate names, or tlsAllowInvalidCertificates (staging only)".into())
                }
                "tlscafile" => opts.ca_file = Some(PathBuf::from(&v)),
                "tlscertificatekeyfile" => opts.certificate_key_file = Some(PathBuf::from(&v)),
                "tlsallowinvalidcertificates" | "tlsinsecure" => opts.allow_invalid_certificates = yes()?,
                "tlscertificatekeyfilepassword" => return Err(
                    "tlsCertificateKeyFilePassword: encrypted keys are not supported; decrypt the key file"
                        .into(),
                ),
                _ => {}
            }
        }
        let asked = opts != TlsOptions::default();
        if explicit_off && asked {
            return Err("tls=false contradicts the TLS file or certificate options given with it".into());
        }
        Ok((tls || asked).then_some(opts))
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()),
        ) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// TLS toward the upstream.
#[derive(Clone)]
pub struct UpstreamTls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UpstreamTls {{ name: {:?} }}", self.name)
    }
}

impl UpstreamTls {
    /// TLS to `host` (the upstream's, for SNI and verification) with `opts`.
    pub fn new(host: &str, opts: &TlsOptions) -> Result<UpstreamTls, String> {
        let name = server_name(host)?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = if opts.allow_invalid_certificates {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAny(
                provider().signature_verification_algorithms,
            )))
        } else {
            let roots = match &opts.ca_file {
                Some(ca) => roots(ca)?,
                None => RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() },
            };
            builder.with_root_certificates(roots)
        };
        let config = match &opts.certificate_key_file {
            Some(f) => builder
                .with_client_auth_cert(certificates(f)?, private_key(f)?)
                .map_err(|e| format!("tlsCertificateKeyFile {}: {e}", f.display()))?,
            None => builder.with_no_client_auth(),
        };
        Ok(UpstreamTls { connector: TlsConnector::from(Arc::new(config)), name })
    }

    /// The same settings toward another server (a replica-set member): SNI and
    /// verification for `host`.
    pub fn for_host(&self, host: &str) -> Result<UpstreamTls, String> {
        let name = server_name(host)?;
        Ok(UpstreamTls { connector: self.connector.clone(), name })
    }

    /// Starts TLS on a connection to the upstream.
    pub async fn connect(&self, tcp: TcpStream) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        self.connector.connect(self.name.clone(), tcp).await
    }
}

/// The name to verify the upstream's certificate against and send as SNI.
fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| format!("upstream host {host:?}: {e}"))
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", path.display()));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{}: no usable private key: {e}", path.display()))
}

fn roots(ca: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for c in certificates(ca)? {
        roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
    }
    Ok(roots)
}

/// `tlsAllowInvalidCertificates`: any certificate is accepted (the handshake's
/// signatures are still checked, so the peer holds the key it shows).
#[derive(Debug)]
struct AcceptAny(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_tls_options_as_drivers_read_them() {
        assert_eq!(TlsOptions::from_uri("mongodb://h:1/").unwrap(), None);
        assert_eq!(TlsOptions::from_uri("mongodb://h:1/?tls=false").unwrap(), None);
        assert_eq!(TlsOptions::from_uri("mongodb://h:1/?tls=true").unwrap(), Some(TlsOptions::default()));
        assert_eq!(TlsOptions::from_uri("mongodb://h:1/?ssl=true").unwrap(), Some(TlsOptions::default()));
        let o = TlsOptions::from_uri(
            "mongodb://h/?TLS=true&tlsCAFile=%2Fetc%2Fca.pem&tlsAllowInvalidCertificates=true",
        )
        .unwrap()
        .unwrap();
        assert_eq!(o.ca_file.as_deref(), Some(Path::new("/etc/ca.pem")));
        assert!(o.allow_invalid_certificates);
        // A TLS file option implies TLS, as in the drivers.
        assert!(TlsOptions::from_uri("mongodb://h/?tlsCertificateKeyFile=/k.pem").unwrap().is_some());
        assert!(TlsOptions::from_uri("mongodb://h/?tls=maybe").is_err());
        assert!(TlsOptions::from_uri("mongodb://h/?tls=true&tlsCertificateKeyFilePassword=x").is_err());
        assert!(
            TlsOptions::from_uri("mongodb://h/?tls=false&tlsCAFile=/ca.pem").is_err(),
            "as drivers refuse it"
        );
        assert!(TlsOptions::from_uri("mongodb://h/?tls=true&tlsAllowInvalidHostnames=true").is_err());
    }
}
