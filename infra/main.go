// Command infra is the s3sqs CDK app: `cdk synth`, `cdk deploy` in this
// directory. It reads its settings from the CDK context (see context.go and
// README.md), builds one stack with the s3sqscdk construct, and checks it
// with cdk-nag (AwsSolutions and Serverless packs) on every synth: an
// unsuppressed finding fails the synth.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func main() {
	err := run()
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3sqs infra:", err)
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	cfg, err := configFromContext(app.Node())
	if err != nil {
		return err
	}
	if _, _, err := newStack(app, cfg, envFromCLI()); err != nil {
		return err
	}
	if cfg.nag {
		addNag(app)
	}
	app.Synth(nil)
	return nil
}

// addNag checks every stack of app with cdk-nag's AwsSolutions and
// Serverless packs.
func addNag(app awscdk.App) {
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewServerlessChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// envFromCLI is the account and region the CDK CLI resolved from the
// credentials, or nil (an environment-agnostic stack) without them.
func envFromCLI() *awscdk.Environment {
	account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if account == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
}
