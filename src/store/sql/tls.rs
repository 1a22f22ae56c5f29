//! TLS for [`PostgresStore`](super::PostgresStore) through rustls (ring):
//! the `sslmode` values of libpq and a custom CA certificate.
//!
//! - `disable`: no TLS.
//! - `prefer` (the default, as in libpq): TLS if the server offers it,
//!   plain otherwise; the certificate is not checked.
//! - `require`: TLS or no connection; the certificate is not checked.
//! - `verify-ca`: TLS, and the server's certificate must chain to a trusted
//!   CA (any host name).
//! - `verify-full`: as `verify-ca`, and the certificate must name the host
//!   connected to.
//!
//! Trusted CAs are the ones given (`sslrootcert=FILE` in the URL, or
//! [`PostgresBuilder::ca_certificate_pem`](super::PostgresBuilder::ca_certificate_pem)),
//! or the system's when none is given.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Socket;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// libpq's `sslmode`, all five values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// What tokio-postgres is told: whether TLS is tried, and required.
    pub(crate) fn driver(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The trusted CAs: `pem` (one or more certificates) if given, else the
/// system's.
fn roots(pem: Option<&[u8]>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match pem {
        Some(pem) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("the CA certificate is not valid PEM: {e}"))?;
            if certs.is_empty() {
                return Err("the CA certificate file holds no certificate".into());
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("the CA certificate was refused: {e}"))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(
                    "no CA certificate given (sslrootcert) and none found on this system".into(),
                );
            }
        }
    }
    Ok(roots)
}

/// The rustls client configuration for `mode` (`None` for `disable`).
pub(crate) fn client_config(
    mode: SslMode,
    ca_pem: Option<&[u8]>,
) -> Result<Option<Arc<ClientConfig>>, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = match mode {
        SslMode::Disable => return Ok(None),
        SslMode::Prefer | SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth(),
        SslMode::VerifyFull => builder
            .with_root_certificates(roots(ca_pem)?)
            .with_no_client_auth(),
        SslMode::VerifyCa => {
            let inner = WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(ca_pem)?),
                Arc::clone(&provider),
            )
            .build()
            .map_err(|e| e.to_string())?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName(inner)))
                .with_no_client_auth()
        }
    };
    Ok(Some(Arc::new(config)))
}

/// `prefer` and `require`: encryption without authentication, as libpq.
#[derive(Debug)]
struct Unverified(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unverified {
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

/// `verify-ca`: the chain is checked, the host name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Makes rustls connections for tokio-postgres.
#[derive(Clone)]
pub(crate) struct Rustls(pub(crate) Option<Arc<ClientConfig>>);

impl MakeTlsConnect<Socket> for Rustls {
    type Stream = Tls;
    type TlsConnect = Connect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<Connect> {
        let name = ServerName::try_from(domain.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Connect {
            config: self.0.clone(),
            name,
        })
    }
}

/// One TLS handshake to come.
pub(crate) struct Connect {
    config: Option<Arc<ClientConfig>>,
    name: ServerName<'static>,
}

impl TlsConnect<Socket> for Connect {
    type Stream = Tls;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Tls>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let config = self.config.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "TLS is disabled (sslmode=disable)",
                )
            })?;
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(self.name, stream)
                .await?;
            Ok(Tls(Box::new(stream)))
        })
    }
}

/// A TLS connection to the server.
pub(crate) struct Tls(Box<tokio_rustls::client::TlsStream<Socket>>);

impl AsyncRead for Tls {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tls {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

impl TlsStream for Tls {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM-SHA-256 without channel binding, as libpq's default
        // (`channel_binding=prefer` only binds when the server asks).
        ChannelBinding::none()
    }
}
