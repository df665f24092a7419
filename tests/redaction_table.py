"""A table of real-world secret formats (fake values) and of look-alikes that are not secrets.

Shared by ``tests/test_redact_table.py`` (recall 1.0, no false positive) and ``bench/redaction.py``
(the hand-written patterns against the ``detect-secrets`` plugins). Each positive is a line as it
shows up in a log, a config or a shell, with the secret that must not survive redaction; among
them the labelled forms (``Error: API_KEY=…``) and lessonbank's own ``lbk_`` keys, and
:func:`dict_key_forms` gives each positive again as a dict key.
Values are made up; prefixes are split so no scanner mistakes this file for a leak.
"""

from __future__ import annotations

AWS_ID = "AKIA" + "Z7QH3M5KX2PLWD4N"
# lessonbank's own API key (server/auth.py): lbk_<12 hex id>_<token_urlsafe(16)>
LBK_TOKEN = "Qm3Xr8Tz1Vb6Nw4-y7Kc_H"
LBK_KEY = "lb" + "k_" + "0f4e8a1c9d3b_" + LBK_TOKEN
AWS_SECRET = "Tq7ZbV1/k9XhRw2Lm4Np8Jc3Fy6Gs0Ud5Ea+HiOj"
PEM_BODY = "MIIEpAIBAAKCAQEAx3Jd9FqLw2K7mPz1\nVnB4tR8yHc6Wq0aZsXe3Ug5Ik"

# (name, line, secret that must disappear)
POSITIVES: list[tuple[str, str, str]] = [
    (
        "openai project key",
        "OPENAI_API_KEY=sk-" + "proj-Qm3Xr8Tz1Vb6Nw4Ly7Kc2Hd9Fs5Gj0Pa_Ue-Io",
        "Qm3Xr8Tz1Vb6Nw4Ly7Kc2Hd9Fs5Gj0Pa_Ue-Io",
    ),
    (
        "openai legacy key",
        "key is sk-" + "Lq2Wm8Rt5Yz1Xc7Vb3Nk9Jh4Gf6Ds0Ap2Mo8Iu5Ey",
        "Lq2Wm8Rt5Yz1Xc7Vb3Nk9Jh4Gf6Ds0Ap2Mo8Iu5Ey",
    ),
    (
        "anthropic key",
        "client = Anthropic(api_key='sk-" + "ant-api03-Rq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs6Jp0Ya_Ue-Io')",
        "Rq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs6Jp0Ya_Ue-Io",
    ),
    ("aws access key id", f"aws configure set aws_access_key_id {AWS_ID}", AWS_ID),
    ("aws temporary key id", "AccessKeyId: ASIA" + "Q4XK7M2ZP9RW3NTB", "ASIA" + "Q4XK7M2ZP9RW3NTB"),
    ("aws secret in env", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    ("aws secret bare next to id", f"creds: {AWS_ID} {AWS_SECRET}", AWS_SECRET),
    ("aws secret in csv", f"Access key ID,Secret access key\n{AWS_ID},{AWS_SECRET}", AWS_SECRET),
    (
        "github classic pat",
        "remote: using gh" + "p_R8mQ2xL5tZ9wB3vC7kD1hF4gS6jP0yA2uE8n",
        "R8mQ2xL5tZ9wB3vC7kD1hF4gS6jP0yA2uE8n",
    ),
    (
        "github oauth token",
        "token gh" + "o_T4kW9mR2xZ7qL5vB8nC3jD6hF1gS0pY4uA7e",
        "T4kW9mR2xZ7qL5vB8nC3jD6hF1gS0pY4uA7e",
    ),
    (
        "github app token",
        "GH_TOKEN=gh" + "s_Z1xC4vB7nM0qW3eR6tY9uI2oP5aS8dF1gH4j",
        "Z1xC4vB7nM0qW3eR6tY9uI2oP5aS8dF1gH4j",
    ),
    (
        "github fine-grained pat",
        "github_" + "pat_11AQWX7YQ0aB3cD5eF7gH9_iJ1kL3mN5oP7qR9sT1uV3wX5yZ7aB9cD1eF3gH5iJ7kL9mN1oP3qR5sT7",
        "11AQWX7YQ0aB3cD5eF7gH9_iJ1kL3mN5oP7qR9sT1uV3wX5yZ7aB9cD1eF3gH5iJ7kL9mN1oP3qR5sT7",
    ),
    ("gitlab pat", "git clone with glp" + "at-Xk7Rm2Qw9Lz4Tb8Vn3Jc", "Xk7Rm2Qw9Lz4Tb8Vn3Jc"),
    (
        "slack bot token",
        "SLACK_BOT_TOKEN=xo" + "xb-2048193847-5839201746382-Qz8Xm3Lw7Rt2Vb9Nk4Jh6Gf1",
        "5839201746382-Qz8Xm3Lw7Rt2Vb9Nk4Jh6Gf1",
    ),
    (
        "slack user token",
        "using xo" + "xp-1234567890-0987654321-1122334455-a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
        "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
    ),
    (
        "slack webhook",
        "POST https://hooks.slack.com/services/" + "T04A1B2C3/B05D6E7F8/Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0",
    ),
    (
        "discord webhook",
        "https://discord.com/api/webhooks/"
        + "1122334455667788990/Zx8Cv7Bn6Mq5Wr4Et3Yu2Io1Pa0SdFgHjKlZxCvBnMqWeRtYuIoPaSdFgHjKlZx",
        "Zx8Cv7Bn6Mq5Wr4Et3Yu2Io1Pa0SdFgHjKlZxCvBnMqWeRtYuIoPaSdFgHjKlZx",
    ),
    (
        "google api key",
        "https://maps.googleapis.com/maps/api/geocode/json?key=AI"
        + "zaSyB7xQ2mR9tL4wZ8vC3kN6hJ1gF5dS0pYq7&address=x",
        "AI" + "zaSyB7xQ2mR9tL4wZ8vC3kN6hJ1gF5dS0pYq7",
    ),
    (
        "google oauth client secret",
        "client_secret: GOCSPX-" + "Rq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs6J",
        "Rq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs6J",
    ),
    (
        "google oauth access token",
        "Authorization header was ya29." + "a0AfB_byC7xQ2mR9tL4wZ8vC3kN6hJ1gF5dS0pY-Qm3Xr8Tz1",
        "a0AfB_byC7xQ2mR9tL4wZ8vC3kN6hJ1gF5dS0pY-Qm3Xr8Tz1",
    ),
    (
        "gcp service account key",
        '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"',
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ),
    (
        "jwt",
        "Cookie: session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIiwicm9sZSI6ImFkbWluIn0.Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5Tc8",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5Tc8",
    ),
    (
        "bearer header",
        "curl -H 'Authorization: Bearer Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1' https://api.example.com",
        "Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1",
    ),
    (
        "basic auth header",
        "Authorization: Basic YWRtaW46czNjcjN0LXBhc3N3b3Jk",
        "YWRtaW46czNjcjN0LXBhc3N3b3Jk",
    ),
    ("x-api-key header", "x-api-key: 7f3k9Qm2Xw8Rt5Lz1Vb4", "7f3k9Qm2Xw8Rt5Lz1Vb4"),
    (
        "rsa private key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEAx3Jd9FqLw2K7mPz1",
    ),
    (
        "openssh private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
    (
        "ec private key",
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5\n-----END EC PRIVATE KEY-----",
        "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5",
    ),
    (
        "pgp private key",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGXz7QIBCADK3vR8\n-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBGXz7QIBCADK3vR8",
    ),
    ("password assignment", "DB_PASSWORD=Tr0ub4dor&3xyz", "Tr0ub4dor&3xyz"),
    ("json password", '{"user": "svc", "password": "c0rrect-h0rse-battery"}', "c0rrect-h0rse-battery"),
    ("yaml secret", "  client_secret: 9Kq2Xm7Rw4Lt8Zb3", "9Kq2Xm7Rw4Lt8Zb3"),
    ("postgres url", "DATABASE_URL=postgres://app:Pg5ecretPass@db.internal:5432/app", "Pg5ecretPass"),
    ("url password with slash", "mysql://root:ab/cd9XyZ@127.0.0.1:3306/shop", "ab/cd9XyZ"),
    ("url password with at", "amqp://guest:p@ssw0rdQ9@rabbit.local:5672/", "p@ssw0rdQ9"),
    ("redis url without user", "REDIS_URL=redis://:Rd1sP4ssw0rd@cache:6379/0", "Rd1sP4ssw0rd"),
    (
        "openai base url credentials",
        "OPENAI_BASE_URL=http://proxyuser:Pr0xyPw9@llm.internal:8080/v1",
        "Pr0xyPw9",
    ),
    (
        "stripe secret key",
        "stripe.api_key = 'sk_" + "live_51Hq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4'",
        "51Hq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4",
    ),
    (
        "stripe test key",
        "charge failed with sk_" + "test_4eC39HqLyjWDarjtT1zdp7dc",
        "4eC39HqLyjWDarjtT1zdp7dc",
    ),
    (
        "stripe restricted key",
        "using rk_" + "live_51Hq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs",
        "51Hq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs",
    ),
    (
        "stripe webhook secret",
        "endpoint secret whsec_" + "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo",
    ),
    (
        "sendgrid key",
        "SG." + "Xq9Wm2Rt5Lz8Vb1Nk4Jh7G.f0Ds3Ap6Mo9Iu2Ey5Tc8Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1",
        "f0Ds3Ap6Mo9Iu2Ey5Tc8Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1",
    ),
    (
        "npm token",
        "//registry.npmjs.org/:_authToken=npm_" + "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2",
    ),
    (
        "npm token bare",
        "publish with npm_" + "Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8",
        "Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8",
    ),
    (
        "pypi token",
        "password = pypi-" + "AgEIcHlwaS5vcmcCJGQ5ZjQ3YzE2LWE4ZjEtNGM2Mi05NzQ1",
        "AgEIcHlwaS5vcmcCJGQ5ZjQ3YzE2LWE4ZjEtNGM2Mi05NzQ1",
    ),
    (
        "pypi token bare",
        "twine upload -u __token__ pypi-" + "AgENdGVzdC5weXBpLm9yZwIkNzE5ZGQ3ZTAtY2Q2Ny00",
        "AgENdGVzdC5weXBpLm9yZwIkNzE5ZGQ3ZTAtY2Q2Ny00",
    ),
    (
        "azure storage connection string",
        "DefaultEndpointsProtocol=https;AccountName=prodlogs;AccountKey=Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5Tc8Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8I==;EndpointSuffix=core.windows.net",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5Tc8Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8I==",
    ),
    (
        "azure service bus key",
        "Endpoint=sb://bus.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8Iq9W=",
        "Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8Iq9W=",
    ),
    (
        "azure sas signature",
        "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2026-01-01&sp=r&sig=Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5%3D",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5",
    ),
    ("cli --password value", "mysqladmin --user=root --password Hx7Qm2Rw9 status", "Hx7Qm2Rw9"),
    ("cli --password=value", "pg_dump --password=Zq8Lw3Tb app > dump.sql", "Zq8Lw3Tb"),
    ("mysql -pPASS", "mysql -u root -pS3cr3tDbPw -h db shop", "S3cr3tDbPw"),
    ("cli --token value", "gh auth login --token Ab3Cd5Ef7Gh9Jk1Lm3No5", "Ab3Cd5Ef7Gh9Jk1Lm3No5"),
    ("curl -u user:pass", "curl -u admin:Adm1nPw55 https://jenkins.local/api/json", "Adm1nPw55"),
    ("netrc", "machine api.heroku.com login me@example.com password Hk9Xq2Lw7Rt", "Hk9Xq2Lw7Rt"),
    ("sql identified by", "CREATE USER 'app'@'%' IDENTIFIED BY 'Sq1Us3rPw!';", "Sq1Us3rPw!"),
    ("sql with password", "ALTER ROLE app WITH PASSWORD 'R0l3Pw#2024';", "R0l3Pw#2024"),
    (
        "twilio api key",
        "TWILIO key SK" + "2b7f4e8a1c9d3b6e0f5a2c7d4e9b1f3a",
        "2b7f4e8a1c9d3b6e0f5a2c7d4e9b1f3a",
    ),
    ("mailgun key", "api:key-" + "3ax6xnjp29jd6fds4gc373sgvjxteol0", "3ax6xnjp29jd6fds4gc373sgvjxteol0"),
    (
        "mailchimp key",
        "MC key 0f4e8a1c9d3b6e2f5a7c4d9e1b3f6a8c-us14",
        "0f4e8a1c9d3b6e2f5a7c4d9e1b3f6a8c-us14",
    ),
    (
        "shopify token",
        "X-Shopify-Access-Token: shp" + "at_4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d",
        "4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d",
    ),
    (
        "hugging face token",
        "huggingface-cli login --token hf_" + "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9I",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9I",
    ),
    (
        "hugging face token bare",
        "loaded model with hf_" + "Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2U",
        "Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2U",
    ),
    (
        "telegram bot token",
        "bot = Bot('5827364910:" + "AAHq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs6Jp0Yab')",
        "AAHq8Wn2Lx5Tz9Mb3Vc7Kd1Hf4Gs6Jp0Yab",
    ),
    (
        "discord bot token",
        "client.run('MTA5ODc2NTQzMjEwOTg3NjU0Mw." + "Gh7Xq2.Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8')",
        "Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8",
    ),
    (
        "square access token",
        "square token EAAA" + "EXq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5Tc8Zk3Xm8Rq2Lw7Tb5Vn",
        "EXq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5Tc8Zk3Xm8Rq2Lw7Tb5Vn",
    ),
    (
        "square oauth secret",
        "sq0" + "csp-Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5T",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5T",
    ),
    (
        "digitalocean token",
        "doctl auth init -t dop_" + "v1_4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d",
        "4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d",
    ),
    (
        "databricks token",
        "DATABRICKS_HOST=x dapi" + "4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d",
        "4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d",
    ),
    (
        "vault token",
        "VAULT_TOKEN is hv" + "s.CAESIXq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9",
        "CAESIXq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9",
    ),
    ("new relic key", "license NR" + "AK-4F8A1C9D3B6E2F5A7C4D9E1B3F6", "4F8A1C9D3B6E2F5A7C4D9E1B3F6"),
    (
        "postman key",
        "postman PM" + "AK-64f8a1c9d3b6e2f5a7c4d9e1-4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d4f",
        "4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d4f",
    ),
    (
        "grafana service account",
        "GRAFANA glsa_" + "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo_4f8a1c9d",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo_4f8a1c9d",
    ),
    (
        "linear api key",
        "linear lin_" + "api_Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5T",
        "Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5T",
    ),
    (
        "age secret key",
        "AGE-SECRET-KEY-" + "1QQPQZRF5VCNF0GX0W3SR9JCZK9DQ4YJMZPHSTYEVKFMDNJKHS7XS8MNLZP",
        "1QQPQZRF5VCNF0GX0W3SR9JCZK9DQ4YJMZPHSTYEVKFMDNJKHS7XS8MNLZP",
    ),
    (
        "docker config auth",
        '{"auths": {"ghcr.io": {"auth": "dXNlcjpnaHBfWHE5V20yUnQ1THo4VmIxTms0"}}}',
        "dXNlcjpnaHBfWHE5V20yUnQ1THo4VmIxTms0",
    ),
    (
        "sentry dsn",
        "SENTRY_DSN=https://4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d@o450123.ingest.sentry.io/5512345",
        "4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d",
    ),
    # A label before the assignment (`label: NAME=value`) must not hide it.
    ("labelled api key", "Error: API_KEY=abcdef123456 rejected", "abcdef123456"),
    ("labelled password", "config: password=hunter2xyz", "hunter2xyz"),
    ("labelled env password", "env: DB_PASSWORD=Tr0ub4dor9xq", "Tr0ub4dor9xq"),
    (
        "labelled fatal error",
        "FATAL: DB_PASSWORD=Pg7Kq2Xm9Rw4 rejected; env: STRIPE_SECRET=St9Lz4Tb8Vn3",
        "Pg7Kq2Xm9Rw4",
    ),
    (
        "labelled second assignment",
        "FATAL: DB_PASSWORD=Pg7Kq2Xm9Rw4 rejected; env: STRIPE_SECRET=St9Lz4Tb8Vn3",
        "St9Lz4Tb8Vn3",
    ),
    ("labelled without space", "Error:SECRET_TOKEN=Zx8Cv7Bn6Mq5 denied", "Zx8Cv7Bn6Mq5"),
    ("labelled in json", '{"error": "API_KEY=Wq3Er5Ty7Ui9 invalid"}', "Wq3Er5Ty7Ui9"),
    ("two labels", "deploy: step: token=Hj4Kl6Zx8Cv0", "Hj4Kl6Zx8Cv0"),
    # lessonbank's own keys, in every place one gets pasted.
    ("lessonbank key bare", f"pasted {LBK_KEY} into the chat", LBK_TOKEN),
    ("lessonbank key bearer", f"curl -H 'Authorization: Bearer {LBK_KEY}' http://127.0.0.1:8765", LBK_TOKEN),
    ("lessonbank key env", f"LESSONBANK_API_KEY={LBK_KEY}", LBK_TOKEN),
    ("lessonbank key labelled", f"401: key {LBK_KEY} revoked", LBK_TOKEN),
    ("lessonbank key in url", f"http://127.0.0.1:8765/api/v1?key={LBK_KEY}", LBK_TOKEN),
]


def dict_key_forms() -> list[tuple[str, dict[str, str], str]]:
    """Every positive as a dict key (``{"<line with the secret>": "x"}``): a key is text too."""
    return [(f"{name} as a dict key", {line: "x"}, secret) for name, line, secret in POSITIVES]


# (name, line): ordinary text that must come back unchanged.
NEGATIVES: list[tuple[str, str]] = [
    ("git sha", "fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b on main"),
    ("short git sha", "revert 3f78685 and e387550"),
    ("sha256", "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    ("md5", "md5sum 5d41402abc4b2a76b9719d911017c592  hello.txt"),
    ("sha1 in pip hash", "--hash=sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"),
    ("uuid", "request id 123e4567-e89b-12d3-a456-426614174000 timed out"),
    ("uuid v4", "episode 9b2c1f7e-4d3a-4b8e-9f6a-2c5d8e1b7a40 recorded"),
    ("base64 text", "payload aGVsbG8gd29ybGQsIHRoaXMgaXMgYSB0ZXN0IG9mIGJhc2U2NA== decoded fine"),
    (
        "base64 image",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg",
    ),
    ("docker digest", "image python@sha256:4c2f8b1e3d5a7c9e1b3f6a8c0d4f8a1c9d3b6e2f5a7c4d9e1b3f6a8c0d4f8a1c"),
    (
        "npm integrity",
        '"integrity": "sha512-Xq9Wm2Rt5Lz8Vb1Nk4Jh7Gf0Ds3Ap6Mo9Iu2Ey5Tc8Zk3Xm8Rq2Lw7Tb5Vn9Jc4Hd1Fs6Gy0Pa2Ue8IQ=="',
    ),
    ("prose password", "The password was wrong, so the login test failed."),
    ("prose token budget", "Stay within the token budget of 4000 tokens per turn."),
    ("prose secret", "The secret to speed is caching the parsed AST between runs."),
    ("prose api key", "Rotate the API key weekly and keep it out of the repository."),
    ("prose authorization", "Authorization failed because the user lacks the admin role."),
    ("url without credentials", "see https://docs.example.com/auth/keys?lang=en for key management"),
    ("email", "mail alice@example.com and bob.smith@corp.example.org"),
    ("ssh url", "git clone git@github.com:org/repo.git"),
    ("python password from env", 'password = os.environ["DB_PASSWORD"]'),
    ("python token call", "token = tokenizer.encode(text)"),
    ("python getpass", "password = getpass.getpass()"),
    ("shell variable", 'psql --password "$PGPASSWORD" -h db'),
    ("placeholder", "export API_KEY=<your-api-key>"),
    ("template", "password: ${DB_PASSWORD}"),
    ("mkdir -p", "mkdir -p /var/lib/app && ssh -p 2222 host"),
    ("pytest -p", "python -m pytest -pno:cacheprovider -q"),
    ("aws key words", "AWS keys start with AKIA followed by 16 characters."),
    ("ipv4", "connect to 10.0.12.7:5432 failed"),
    ("timestamp", "2024-05-01T12:34:56.789Z INFO started in 1.234s"),
    ("file path", "/usr/lib/python3.11/site-packages/pydantic/main.py line 164"),
    ("camel identifiers", "SecretManagerClientConfigurationBuilder.withTokenRefreshInterval(30)"),
    ("go code", 'if err := db.Ping(); err != nil { return fmt.Errorf("ping: %w", err) }'),
    ("sql", "SELECT id, password_hash FROM users WHERE email = $1"),
    ("version strings", "upgraded numpy 1.26.4 -> 2.0.1, torch 2.3.0+cu121"),
    ("long identifier", "test_reflection_flow_handles_empty_reply_without_raising_value_error"),
    ("jwt mention", "A JWT has three base64url parts separated by dots."),
    ("hex color and ids", "color #1f2937, job_01hx7k2m9q4r8s3t6v1w5y0z2a, les_01hx7k2m9q4r8s3t6v1w5y0z2b"),
    ("traceback", 'File "/app/main.py", line 42, in handler\n    raise KeyError("token")'),
    ("key word prose", "Press the key, then keep the keyboard shortcut for tokens."),
    # Labels before an ordinary assignment stay as they are.
    ("labelled ratio", "ratio: x=3"),
    ("key=value docs", "Options are given as key=value pairs, e.g. retries=3."),
    ("labelled setting", "Error: retries=3 exceeded; config: timeout=30"),
    ("labelled token count", "usage: token_count=4000 of 8000"),
    ("lessonbank key prefix prose", "Keys start with lbk_ followed by an id and a secret."),
]
