#!/bin/sh
# Makes a test deployment's certificates with openssl: a CA, a server
# certificate and one client certificate per client id, each client's
# common name being its id (the server checks that a client's certificate
# names the client id it registers as).
#
#   deploy/make-certs.sh DIR [SERVER_NAME_OR_IP] [CLIENT_ID...]
#
# Defaults: server 127.0.0.1, clients Client1 Client2 Client3. Writes
# DIR/ca.pem, DIR/server.pem, DIR/server.key, DIR/<id>.pem, DIR/<id>.key,
# and tokens of 128 random bits (openssl rand; too many to guess, so the
# server's throttle of failed Hellos never needs to lock anyone out):
# DIR/tokens.yaml (the server's authenticator_args.tokens_file) and
# DIR/<id>.token (each client's authenticator_args.auth_token_file).
# Keys are EC P-256, certificates valid for 30 days. For a real deployment
# use your organisation's CA; keep the *.key files and ca.key private.
set -eu
dir=${1:?usage: make-certs.sh DIR [SERVER_NAME_OR_IP] [CLIENT_ID...]}
server=${2:-127.0.0.1}
[ $# -ge 2 ] && shift 2 || shift $#
clients=${*:-Client1 Client2 Client3}
mkdir -p "$dir"
cd "$dir"
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 30 -subj "/CN=fedcaf test CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem

case $server in
  *[!0-9.]*) san="DNS:$server" ;;
  *) san="IP:$server" ;;
esac

# sign NAME CN EXTENSIONS: NAME.key and NAME.pem signed by the CA.
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
    -days 30 -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

sign server "$server" "subjectAltName=$san
extendedKeyUsage=serverAuth"
for id in $clients; do
  sign "$id" "$id" "extendedKeyUsage=clientAuth"
done
chmod 644 ca.pem server.pem
for id in $clients; do chmod 644 "$id.pem"; done
: > tokens.yaml
for id in $clients; do
  token=$(openssl rand -hex 16)
  printf '%s\n' "$token" > "$id.token"
  printf '%s: "%s"\n' "$id" "$token" >> tokens.yaml
done
echo "certificates and tokens for server $server and clients $clients in $dir"
